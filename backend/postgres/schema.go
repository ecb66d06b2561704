package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrInvalidIdentifier is returned (wrapped) for a schema or table name that
// cannot be used.
var ErrInvalidIdentifier = errors.New("postgres: invalid identifier")

// Identifier limits. PostgreSQL silently truncates names longer than 63 bytes,
// which could make two tables share one name, so longer names are rejected.
// The table name leaves room for the longest derived name (the index).
const (
	maxIdentBytes = 63
	seqSuffix     = "_token_seq"
	indexSuffix   = "_expires_at_idx"
	// MaxTableBytes is the longest table name, in bytes.
	MaxTableBytes = maxIdentBytes - len(indexSuffix)
)

// ValidateIdentifier reports why name cannot be a schema or table name: empty,
// invalid UTF-8, a NUL byte, or longer than maxBytes. Any other character,
// quotes and semicolons included, is allowed: names are always quoted.
func ValidateIdentifier(what, name string, maxBytes int) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalidIdentifier, what)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s name is not valid UTF-8", ErrInvalidIdentifier, what)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %s name contains a NUL byte", ErrInvalidIdentifier, what)
	case len(name) > maxBytes:
		return fmt.Errorf("%w: %s name is %d bytes, more than %d", ErrInvalidIdentifier, what, len(name), maxBytes)
	}
	return nil
}

func validateNames(schema, table string) error {
	if err := ValidateIdentifier("schema", schema, maxIdentBytes); err != nil {
		return err
	}
	return ValidateIdentifier("table", table, MaxTableBytes)
}

// names holds the quoted, schema-qualified names derived from schema and table.
type names struct {
	schema   string // quoted schema
	table    string // quoted, qualified table
	sequence string // quoted, qualified sequence
	index    string // quoted index name (indexes live in the table's schema)
}

func newNames(schema, table string) names {
	return names{
		schema:   pgx.Identifier{schema}.Sanitize(),
		table:    pgx.Identifier{schema, table}.Sanitize(),
		sequence: pgx.Identifier{schema, table + seqSuffix}.Sanitize(),
		index:    pgx.Identifier{table + indexSuffix}.Sanitize(),
	}
}

// ddl returns the statements that create the schema, the token sequence, the
// table and its expiry index; each is idempotent.
//
// The sequence is not OWNED BY the table, so that dropping and re-creating the
// table does not restart the tokens. Names use the "C" collation: comparison
// is by bytes, so "Foo" and "foo" are different leases under any database
// collation.
func ddl(schema, table string) []string {
	n := newNames(schema, table)
	return []string{
		"CREATE SCHEMA IF NOT EXISTS " + n.schema,
		"CREATE SEQUENCE IF NOT EXISTS " + n.sequence + " AS bigint MINVALUE 1 START WITH 1 CACHE 1 NO CYCLE",
		"CREATE TABLE IF NOT EXISTS " + n.table + ` (
    lease_name        text COLLATE "C" NOT NULL PRIMARY KEY CHECK (char_length(lease_name) BETWEEN 1 AND 200),
    owner_instance_id text COLLATE "C" NOT NULL CHECK (char_length(owner_instance_id) BETWEEN 1 AND 200),
    fencing_token     bigint NOT NULL CHECK (fencing_token > 0),
    acquired_at       timestamptz NOT NULL,
    renewed_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    metadata          text NOT NULL DEFAULT '' CHECK (octet_length(metadata) <= 4000)
)`,
		"CREATE INDEX IF NOT EXISTS " + n.index + " ON " + n.table + " (expires_at)",
	}
}

// CreateScript returns the DDL that EnsureSchema runs, for deployments that
// create the table out of band. Names are quoted, so any valid name is safe
// to embed. For an invalid name it returns only an SQL comment saying so
// (running it creates nothing).
func CreateScript(schema, table string) string {
	if err := validateNames(schema, table); err != nil {
		return "-- leasehold: cannot create the lease table: invalid schema or table name\n"
	}
	return strings.Join(ddl(schema, table), ";\n\n") + ";\n"
}

// ensureLockKey serialises concurrent EnsureSchema calls on one database, so
// that racing CREATE ... IF NOT EXISTS statements do not fail on the catalog's
// unique indexes.
const ensureLockKey int64 = 0x6c65617365686f6c // "leasehol"

// EnsureSchema creates the schema, token sequence, table and index when they
// do not exist, and leaves them alone when they do. It is safe to call on
// every start and from several processes at once: the DDL runs in one
// transaction under an advisory lock, and an "already exists" race with DDL
// run outside it counts as success.
func EnsureSchema(ctx context.Context, pool *pgxpool.Pool, schema, table string) error {
	if err := validateNames(schema, table); err != nil {
		return err
	}
	var err error
	for range 3 {
		if err = ensureOnce(ctx, pool, schema, table); err == nil || !isDuplicateObject(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: ensure schema: %w", err)
	}
	return nil
}

func ensureOnce(ctx context.Context, pool *pgxpool.Pool, schema, table string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", ensureLockKey); err != nil {
			return err
		}
		for _, stmt := range ddl(schema, table) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
}

// isDuplicateObject reports the errors of a CREATE ... IF NOT EXISTS that lost
// a race: unique_violation on a catalog, duplicate_table/schema/object.
func isDuplicateObject(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "23505", "42P06", "42P07", "42710":
		return true
	}
	return false
}
