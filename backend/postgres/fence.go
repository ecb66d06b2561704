package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
)

// DefaultFenceTable is the table, in DefaultSchema, where Fence records the
// highest fencing token of each resource.
const DefaultFenceTable = "fences"

// fenceColumns are the columns of a fence table.
var fenceColumns = []string{"resource", "token"}

// Fence guards the writes of tx with a lease's fencing token: it records
// token for resource in lease.fences (EnsureFenceSchema creates it) and
// fails with a *leasehold.StaleTokenError (errors.Is
// leasehold.ErrStaleToken) when a higher token was recorded; an equal token
// passes (the same holder writing again). Call it first in the transaction
// that makes the writes, and roll back when it fails: it keeps the fence
// row locked until tx ends, so that the writes commit only under the newest
// holder and a holder with a newer token waits for them rather than
// interleaving. Tokens above math.MaxInt64 (no leasehold store issues them)
// are refused with fence.ErrInvalidFence.
func Fence(ctx context.Context, tx pgx.Tx, resource string, token uint64) error {
	return FenceTable{Schema: DefaultSchema, Table: DefaultFenceTable}.Fence(ctx, tx, resource, token)
}

// FenceTable is a fence table other than lease.fences.
type FenceTable struct {
	Schema, Table string
}

// Fence is the package's Fence on table f.
func (f FenceTable) Fence(ctx context.Context, tx pgx.Tx, resource string, token uint64) error {
	if err := f.validate(resource, token); err != nil {
		return err
	}
	q := pgx.Identifier{f.Schema, f.Table}.Sanitize()
	// The WHERE makes the upsert leave a higher token alone (and return no
	// row) while still locking the row until tx ends.
	var recorded int64
	err := tx.QueryRow(ctx, `INSERT INTO `+q+` AS f (resource, token) VALUES ($1, $2)
		ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
		RETURNING f.token`, resource, int64(token)).Scan(&recorded)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: fence %q: %w", resource, err)
	}
	var highest int64
	if err := tx.QueryRow(ctx, `SELECT token FROM `+q+` WHERE resource = $1`, resource).Scan(&highest); err != nil {
		return fmt.Errorf("postgres: fence %q: read the recorded token: %w", resource, err)
	}
	return &leasehold.StaleTokenError{Resource: resource, Token: token, Highest: uint64(highest)}
}

func (f FenceTable) validate(resource string, token uint64) error {
	if err := ValidateTable(f.Schema, f.Table); err != nil {
		return err
	}
	if err := fence.Validate(resource, token); err != nil {
		return err
	}
	if token > math.MaxInt64 {
		return fmt.Errorf("%w: token %d is above the largest bigint", fence.ErrInvalidFence, token)
	}
	return nil
}

// fenceDDL creates schema.table when missing; names are quoted.
func fenceDDL(schema, table string) []string {
	return []string{
		"CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{schema}.Sanitize(),
		"CREATE TABLE IF NOT EXISTS " + pgx.Identifier{schema, table}.Sanitize() + ` (
	resource text COLLATE "C" PRIMARY KEY,
	token    bigint NOT NULL CHECK (token > 0)
)`,
	}
}

// FenceCreateScript returns the DDL that EnsureFenceSchema runs, for
// deployments that create tables out of band. For an invalid name it
// returns only an SQL comment saying so.
func FenceCreateScript(schema, table string) string {
	if err := ValidateTable(schema, table); err != nil {
		return "-- leasehold: cannot create the fence table: invalid schema or table name\n"
	}
	s := ""
	for _, stmt := range fenceDDL(schema, table) {
		s += stmt + ";\n\n"
	}
	return s[:len(s)-1]
}

// EnsureFenceSchema creates the schema and fence table when they do not
// exist and checks that a table already there has the fence columns
// (errors wrap ErrSchemaConflict). Like EnsureSchema it is safe on every
// start and from several processes at once.
func EnsureFenceSchema(ctx context.Context, pool *pgxpool.Pool, schema, table string) error {
	if err := ValidateTable(schema, table); err != nil {
		return err
	}
	var err error
	for range 3 {
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", ensureLockKey); err != nil {
				return err
			}
			for _, stmt := range fenceDDL(schema, table) {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return err
				}
			}
			return checkColumns(ctx, tx, schema, table, pgx.Identifier{schema, table}.Sanitize(), fenceColumns, "a fence table")
		})
		if err == nil || !isDuplicateObject(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: ensure fence schema: %w", err)
	}
	return nil
}

// FenceStore is a fence.Store on a fence table: each Check runs Fence in a
// transaction of its own, so it records the token but guards no write. It
// serves fence/httpfence and fence/grpcfence when several server processes
// share one resource; a write to this database is better guarded by Fence
// in the write's own transaction.
func FenceStore(pool *pgxpool.Pool, t FenceTable) fence.Store { return &fenceStore{pool: pool, t: t} }

type fenceStore struct {
	pool *pgxpool.Pool
	t    FenceTable
}

func (s *fenceStore) Check(ctx context.Context, resource string, token uint64) error {
	if err := s.t.validate(resource, token); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.t.Fence(ctx, tx, resource, token) })
}
