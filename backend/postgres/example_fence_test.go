package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/postgres"
)

// The PostgreSQL guard and the run-once recipe of docs/fencing-tokens.md,
// verbatim between the markers (readme_test.go in the root package checks
// them). It runs against $LEASEHOLD_POSTGRES_DSN (default: the local test
// database).
func Example_fence() {
	ctx := context.Background()
	dsn := cmp.Or(os.Getenv("LEASEHOLD_POSTGRES_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if err := postgres.EnsureSchema(ctx, pool, postgres.DefaultSchema, postgres.DefaultTable); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS jobs_done (job text PRIMARY KEY, token bigint NOT NULL)"); err != nil {
		panic(err)
	}
	b, _ := postgres.New(pool)
	defer b.Close()
	m, _ := leasehold.New(b)
	defer m.Close(ctx)
	job := "month-close-2026-11"
	closeMonth := func(ctx context.Context, tx pgx.Tx) error { return nil }
	run := func() error {
		// docs/fencing-tokens.md: PostgreSQL
		// Once at start-up (or run postgres.FenceCreateScript out of band):
		if err := postgres.EnsureFenceSchema(ctx, pool, postgres.DefaultSchema, postgres.DefaultFenceTable); err != nil {
			return err
		}
		// Run the job once across the fleet: a lease, and a completion
		// record written under the fence in the job's own transaction.
		return m.Do(ctx, "month-close", func(ctx context.Context) error {
			l, _ := leasehold.LeaseFrom(ctx)
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if err := postgres.Fence(ctx, tx, "month-close", l.Token()); err != nil {
					return err // leasehold.ErrStaleToken: a newer holder took over
				}
				var done bool
				err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM jobs_done WHERE job = $1)", job).Scan(&done)
				if err != nil || done {
					return err // done already, here or by another process
				}
				if err := closeMonth(ctx, tx); err != nil { // the job's writes, in tx
					return err
				}
				_, err = tx.Exec(ctx, "INSERT INTO jobs_done (job, token) VALUES ($1, $2)", job, l.Token())
				return err
			})
		}, leasehold.WithWait(time.Minute))
		// end docs
	}
	fmt.Println("done:", run())
	// Output:
	// done: <nil>
}
