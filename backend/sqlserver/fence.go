package sqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
)

// DefaultFenceTable is the table, in DefaultSchema, where Fence records the
// highest fencing token of each resource.
const DefaultFenceTable = "Fences"

// maxFenceResource is the longest resource name in UTF-16 units: the
// primary key's NVARCHAR(450) is 900 bytes, SQL Server's limit for a
// clustered index key.
const maxFenceResource = 450

// FenceTable is a fence table other than [lease].[Fences].
type FenceTable struct {
	Schema, Table string
}

// Fence guards the writes of tx with a lease's fencing token: it records
// token for resource in [lease].[Fences] (EnsureFenceSchema creates it) and
// fails with a *leasehold.StaleTokenError (errors.Is
// leasehold.ErrStaleToken) when a higher token was recorded; an equal token
// passes (the same holder writing again). Call it first in the transaction
// that makes the writes, and roll back when it fails: it reads the fence row
// WITH (UPDLOCK, HOLDLOCK), which holds it (or, for a new resource, its key
// range) until tx ends, so that the writes commit only under the newest
// holder. Two first writers of a new resource may deadlock; SQL Server then
// fails one of them (error 1205), which fails closed. Resource names longer
// than 450 UTF-16 units and tokens above math.MaxInt64 are refused with
// fence.ErrInvalidFence.
func Fence(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	return FenceTable{Schema: DefaultSchema, Table: DefaultFenceTable}.Fence(ctx, tx, resource, token)
}

// Fence is the package's Fence on table f.
func (f FenceTable) Fence(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	q, err := f.check(resource, token)
	if err != nil {
		return err
	}
	var passed bool
	var highest sql.NullInt64
	err = tx.QueryRowContext(ctx, fenceSQL(q), sql.Named("resource", resource), sql.Named("token", int64(token))).Scan(&passed, &highest)
	if err != nil {
		return fmt.Errorf("sqlserver: fence %q: %w", resource, err)
	}
	if !passed {
		return &leasehold.StaleTokenError{Resource: resource, Token: token, Highest: uint64(highest.Int64)}
	}
	return nil
}

// check validates the call and returns the quoted table.
func (f FenceTable) check(resource string, token uint64) (string, error) {
	if _, err := newObjectNames(f.Schema, f.Table); err != nil {
		return "", err
	}
	if err := fence.Validate(resource, token); err != nil {
		return "", err
	}
	if n := utf16Len(resource); n > maxFenceResource {
		return "", fmt.Errorf("%w: resource name is %d UTF-16 units, more than %d", fence.ErrInvalidFence, n, maxFenceResource)
	}
	if token > math.MaxInt64 {
		return "", fmt.Errorf("%w: token %d is above the largest BIGINT", fence.ErrInvalidFence, token)
	}
	return quoteIdent(f.Schema) + "." + quoteIdent(f.Table), nil
}

// fenceSQL reads the recorded token under an update lock held to the end of
// the transaction, records @token unless it is lower, and answers whether
// it passed and the token recorded before.
func fenceSQL(table string) string {
	return strings.ReplaceAll(`SET NOCOUNT ON;
DECLARE @highest BIGINT;
SELECT @highest = Token FROM {t} WITH (UPDLOCK, HOLDLOCK) WHERE Resource = @resource;
IF @highest IS NULL
    INSERT INTO {t} (Resource, Token) VALUES (@resource, @token);
ELSE IF @highest <= @token
    UPDATE {t} SET Token = @token WHERE Resource = @resource;
SELECT CAST(CASE WHEN @highest IS NULL OR @highest <= @token THEN 1 ELSE 0 END AS BIT) AS Passed, @highest AS Highest;`, "{t}", table)
}

// fenceDDL creates the schema and the fence table when missing, one batch
// each (CREATE SCHEMA must be alone in its batch, hence sp_executesql).
func fenceDDL(schema, table string) []string {
	q := quoteIdent(schema) + "." + quoteIdent(table)
	return []string{
		fmt.Sprintf("IF SCHEMA_ID(%s) IS NULL\n    EXEC sys.sp_executesql %s;", quoteLiteral(schema), quoteLiteral("CREATE SCHEMA "+quoteIdent(schema))),
		fmt.Sprintf(`IF OBJECT_ID(%s, N'U') IS NULL
    CREATE TABLE %s (
        Resource NVARCHAR(450) COLLATE %s NOT NULL PRIMARY KEY CLUSTERED,
        Token    BIGINT        NOT NULL CHECK (Token > 0)
    );`, quoteLiteral(q), q, binaryCollation),
	}
}

// FenceCreateScript returns the DDL that EnsureFenceSchema runs, for DBAs
// who create tables out of band. For an invalid name it returns a script
// that fails with the reason.
func FenceCreateScript(schema, table string) string {
	if _, err := newObjectNames(schema, table); err != nil {
		return fmt.Sprintf("-- leasehold: cannot create the fence table\nTHROW 50000, %s, 1;\nGO\n", quoteLiteral(err.Error()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- leasehold fence table %s.%s (SQL Server 2016+, Azure SQL)\n", quoteIdent(schema), quoteIdent(table))
	for _, s := range fenceDDL(schema, table) {
		b.WriteString(s)
		b.WriteString("\nGO\n")
	}
	return b.String()
}

// EnsureFenceSchema creates the schema and the fence table when they are
// missing. It is idempotent and safe when several instances run it at once.
func EnsureFenceSchema(ctx context.Context, db *sql.DB, schema, table string) error {
	if _, err := newObjectNames(schema, table); err != nil {
		return err
	}
	for _, stmt := range fenceDDL(schema, table) {
		if err := execDDL(ctx, db, stmt); err != nil {
			return fmt.Errorf("sqlserver: ensure fence schema: %w", err)
		}
	}
	return nil
}

// FenceStore is a fence.Store on a fence table: each Check runs Fence in a
// transaction of its own, so it records the token but guards no write (for
// fence/httpfence and fence/grpcfence).
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
		return fmt.Errorf("sqlserver: fence %q: %w", resource, err)
	}
	if err := s.t.Fence(ctx, tx, resource, token); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
