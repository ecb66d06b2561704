package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/postgres"
)

// The Go block of docs/backends/postgres.md, verbatim between the markers
// (readme_test.go in the root package checks it), as the body of a function
// returning an error. It runs against $LEASEHOLD_POSTGRES_DSN (default: the
// local test database).
func Example_readme() {
	ctx := context.Background()
	dsn := cmp.Or(os.Getenv("LEASEHOLD_POSTGRES_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	run := func() error {
		// docs/backends/postgres.md
		pool, _ := pgxpool.New(ctx, dsn)
		if err := postgres.EnsureSchema(ctx, pool, postgres.DefaultSchema, postgres.DefaultTable); err != nil {
			return err
		}
		b, _ := postgres.New(pool) // options: WithTable(schema, table), WithLogger, WithRetry, WithSweep
		m, _ := leasehold.New(b)
		// end docs
		defer pool.Close()
		defer b.Close()
		defer m.Close(ctx)
		return m.Do(ctx, "example-readme", func(ctx context.Context) error {
			l, _ := leasehold.LeaseFrom(ctx)
			fmt.Println("holding", l.Name())
			return nil
		})
	}
	fmt.Println("done:", run())
	// Output:
	// holding example-readme
	// done: <nil>
}
