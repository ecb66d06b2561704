package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
)

// DefaultFenceTable is the table, in DefaultSchema, where Fence records the
// highest fencing token of each resource.
const DefaultFenceTable = "fences"

// fenceColumns are what EnsureFenceSchema requires of a fence table.
var fenceColumns = []column{{"resource", "varbinary"}, {"token", "bigint"}}

// FenceTable is a fence table other than leasehold.fences: Schema is its
// database.
type FenceTable struct {
	Schema, Table string
}

// Fence guards the writes of tx with a lease's fencing token: it records
// token for resource in leasehold.fences (EnsureFenceSchema creates it) and
// fails with a *leasehold.StaleTokenError (errors.Is
// leasehold.ErrStaleToken) when a higher token was recorded; an equal token
// passes (the same holder writing again). Call it first in the transaction
// that makes the writes, and roll back when it fails: it upserts the fence
// row (INSERT ... ON DUPLICATE KEY UPDATE), which holds its lock until tx
// ends, so that the writes commit only under the newest holder and a holder
// with a newer token waits for them rather than interleaving. InnoDB may
// still end a lock wait with a deadlock (1213) or a lock wait timeout
// (1205); both fail the call, and tx must then be rolled back: it fails
// closed, and the caller may run its whole transaction again.
func Fence(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	return FenceTable{Schema: DefaultSchema, Table: DefaultFenceTable}.Fence(ctx, tx, resource, token)
}

// Fence is the package's Fence on table f.
func (f FenceTable) Fence(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	q, err := f.check(resource, token)
	if err != nil {
		return err
	}
	if tx == nil {
		return errors.New("mysql: Fence: nil *sql.Tx")
	}
	// The upsert locks the row whether it inserts, raises or keeps the
	// token; GREATEST leaves a higher token alone.
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+q+" (resource, token) VALUES (?, ?) ON DUPLICATE KEY UPDATE token = GREATEST(token, ?)",
		resource, token, token); err != nil {
		return fmt.Errorf("mysql: fence %q: %w", resource, err)
	}
	// A locking read sees the latest committed row, whatever snapshot the
	// caller's transaction read before.
	var highest uint64
	if err := tx.QueryRowContext(ctx, "SELECT token FROM "+q+" WHERE resource = ? FOR UPDATE", resource).Scan(&highest); err != nil {
		return fmt.Errorf("mysql: fence %q: read the recorded token: %w", resource, err)
	}
	if highest > token {
		return &leasehold.StaleTokenError{Resource: resource, Token: token, Highest: highest}
	}
	return nil
}

// check validates the call and returns the quoted table.
func (f FenceTable) check(resource string, token uint64) (string, error) {
	if err := checkIdentifier("schema", f.Schema, 64); err != nil {
		return "", err
	}
	if err := checkIdentifier("table", f.Table, 64); err != nil {
		return "", err
	}
	if err := fence.Validate(resource, token); err != nil {
		return "", err
	}
	return f.quoted(), nil
}

func (f FenceTable) quoted() string { return "`" + f.Schema + "`.`" + f.Table + "`" }

// fenceDDL creates the database and the fence table when missing. The
// resource is VARBINARY, so that names compare byte for byte under any
// collation, and as long as the longest name a guard accepts.
func fenceDDL(f FenceTable) []string {
	return []string{
		"CREATE DATABASE IF NOT EXISTS `" + f.Schema + "`",
		"CREATE TABLE IF NOT EXISTS " + f.quoted() + fmt.Sprintf(` (
    resource VARBINARY(%d)   NOT NULL,
    token    BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (resource)
) ENGINE=InnoDB`, fence.MaxResourceBytes),
	}
}

// FenceCreateScript returns the DDL that EnsureFenceSchema runs, as a
// script for the mysql client, for deployments that create tables out of
// band. For an invalid name it returns a script that fails with the reason.
func FenceCreateScript(schema, table string) string {
	f := FenceTable{Schema: schema, Table: table}
	if _, err := f.check("r", 1); err != nil {
		return "-- leasehold: cannot create the fence table\nSIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" +
			strings.ReplaceAll(err.Error(), "'", "''") + "';\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- leasehold fence table %s.%s (MySQL 8.0+, MariaDB 10.6+)\n", schema, table)
	for _, s := range fenceDDL(f) {
		b.WriteString(s)
		b.WriteString(";\n")
	}
	return b.String()
}

// EnsureFenceSchema creates the database and the fence table when they are
// missing and checks that a table already there is an InnoDB table with the
// fence columns (errors wrap ErrSchemaMismatch). It is idempotent and safe
// when several instances run it at once.
func EnsureFenceSchema(ctx context.Context, db *sql.DB, schema, table string) error {
	if db == nil {
		return errors.New("mysql: EnsureFenceSchema: nil *sql.DB")
	}
	f := FenceTable{Schema: schema, Table: table}
	if _, err := f.check("r", 1); err != nil {
		return err
	}
	for _, stmt := range fenceDDL(f) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("mysql: EnsureFenceSchema %s.%s: %w", schema, table, err)
		}
	}
	return checkFenceShape(ctx, db, f)
}

// checkFenceShape returns ErrSchemaMismatch when f is not InnoDB (whose row
// locks the guard relies on) or lacks a fence column.
func checkFenceShape(ctx context.Context, db *sql.DB, f FenceTable) error {
	var engine sql.NullString
	err := db.QueryRowContext(ctx, `SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		f.Schema, f.Table).Scan(&engine)
	if err != nil {
		return fmt.Errorf("mysql: checking fence table %s.%s: %w", f.Schema, f.Table, err)
	}
	if !strings.EqualFold(engine.String, "InnoDB") {
		return fmt.Errorf("%w: %s.%s uses engine %q, not InnoDB", ErrSchemaMismatch, f.Schema, f.Table, engine.String)
	}
	for _, c := range fenceColumns {
		var typ, columnType string
		err := db.QueryRowContext(ctx, `SELECT DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?`, f.Schema, f.Table, c.name).Scan(&typ, &columnType)
		if errors.Is(err, sql.ErrNoRows) || err == nil && !strings.EqualFold(typ, c.dataType) {
			return fmt.Errorf("%w: %s.%s: column %s must be %s (found %q)", ErrSchemaMismatch, f.Schema, f.Table, c.name, c.dataType, typ)
		}
		if err != nil {
			return fmt.Errorf("mysql: checking fence table %s.%s: %w", f.Schema, f.Table, err)
		}
		if c.name == "token" && !strings.Contains(strings.ToLower(columnType), "unsigned") {
			return fmt.Errorf("%w: %s.%s: column token must be BIGINT UNSIGNED (found %q)", ErrSchemaMismatch, f.Schema, f.Table, columnType)
		}
	}
	return nil
}

// FenceStore is a fence.Store on a fence table: each Check runs Fence in a
// transaction of its own, so it records the token but guards no write. It
// serves fence/httpfence and fence/grpcfence when several server processes
// share one resource; a write to this database is better guarded by Fence
// in the write's own transaction.
func FenceStore(db *sql.DB, t FenceTable) fence.Store { return &fenceStore{db: db, t: t} }

type fenceStore struct {
	db *sql.DB
	t  FenceTable
}

func (s *fenceStore) Check(ctx context.Context, resource string, token uint64) error {
	if _, err := s.t.check(resource, token); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("mysql: fence %q: %w", resource, err)
	}
	if err := s.t.Fence(ctx, tx, resource, token); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("mysql: fence %q: commit: %w", resource, err)
	}
	return nil
}
