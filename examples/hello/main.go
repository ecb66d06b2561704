// Command hello is the README's complete program on the memory backend (one
// process, no services): go -C examples run ./hello
package main

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	b := memory.New() // leases shared by the Managers of this process only
	defer b.Close()
	m, err := leasehold.New(b, leasehold.WithOwner("billing-7f9c"))
	if err != nil {
		return err
	}
	defer m.Close(ctx)

	err = m.Do(ctx, "invoice-run", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		log.Printf("running %s with fencing token %d", l.Name(), l.Token())
		return nil
	}, leasehold.WithTTL(15*time.Second))
	if errors.Is(err, leasehold.ErrNotAcquired) {
		log.Print("someone else holds invoice-run")
		return nil
	}
	return err
}
