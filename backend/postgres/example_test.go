package postgres_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/postgres"
)

// Two owners, as two processes would be, share a name through PostgreSQL. It
// runs against $LEASEHOLD_POSTGRES_DSN (default: the local test database).
func Example() {
	ctx := context.Background()
	dsn := cmp.Or(os.Getenv("LEASEHOLD_POSTGRES_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	// At start-up: creates lease.leases when it is missing (idempotent).
	if err := postgres.EnsureSchema(ctx, pool, postgres.DefaultSchema, postgres.DefaultTable); err != nil {
		panic(err)
	}
	store, err := postgres.New(pool)
	if err != nil {
		panic(err)
	}
	defer store.Close()

	a, err := leasehold.New(store, leasehold.WithOwner("worker-a"))
	if err != nil {
		panic(err)
	}
	defer a.Close(ctx)
	b, err := leasehold.New(store, leasehold.WithOwner("worker-b"))
	if err != nil {
		panic(err)
	}
	defer b.Close(ctx)

	lease, err := a.Acquire(ctx, "example-nightly-report", leasehold.WithTTL(10*time.Second), leasehold.WithWait(30*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println(lease.Owner(), "holds", lease.Name())
	_, err = b.Acquire(ctx, "example-nightly-report") // one attempt, no wait
	fmt.Println("worker-b turned away:", errors.Is(err, leasehold.ErrNotAcquired))
	if err := lease.Release(ctx); err != nil {
		panic(err)
	}

	// worker-b waits for the name; the release's NOTIFY wakes it.
	err = b.Do(ctx, "example-nightly-report", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		fmt.Println(l.Owner(), "holds", l.Name(), "with a higher token:", l.Token() > lease.Token())
		return nil // ctx is cancelled if the lease is lost meanwhile
	}, leasehold.WithTTL(10*time.Second), leasehold.WithWait(30*time.Second))
	fmt.Println("done:", err)
	// Output:
	// worker-a holds example-nightly-report
	// worker-b turned away: true
	// worker-b holds example-nightly-report with a higher token: true
	// done: <nil>
}
