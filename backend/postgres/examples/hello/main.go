// Command hello is the README's complete program on PostgreSQL (the DSN in
// $DATABASE_URL); start several at once and each runs the work in turn:
// go -C backend/postgres run ./examples/hello
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/postgres"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // e.g. postgres://postgres@127.0.0.1:5432/test
	if err != nil {
		return err
	}
	defer pool.Close()
	// Once per database, before the first Acquire (or apply postgres.CreateScript).
	if err := postgres.EnsureSchema(ctx, pool, postgres.DefaultSchema, postgres.DefaultTable); err != nil {
		return err
	}
	b, err := postgres.New(pool)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := leasehold.New(b) // a unique owner id per process by default
	if err != nil {
		return err
	}
	defer m.Close(ctx)

	err = m.Do(ctx, "invoice-run", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		log.Printf("running %s with fencing token %d", l.Name(), l.Token())
		return nil
	}, leasehold.WithTTL(15*time.Second), leasehold.WithWait(time.Minute))
	if errors.Is(err, leasehold.ErrNotAcquired) {
		log.Print("another process held invoice-run for the whole minute")
		return nil
	}
	return err
}
