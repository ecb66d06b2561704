package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

// The README's quick start, verbatim between the markers (readme_test.go
// checks it): run is the function the README's code is the body of.
func Example_atAGlance() {
	ctx := context.Background()
	backend := memory.New()
	doWork := func(ctx context.Context, token uint64) error {
		l, _ := leasehold.LeaseFrom(ctx)
		fmt.Println("working on", l.Name(), "with fencing token", token)
		return nil
	}
	run := func() error {
		// README: Quick start
		m, err := leasehold.New(backend, leasehold.WithOwner("billing-7f9c")) // one per process
		if err != nil {
			return err
		}
		defer m.Close(ctx) // releases everything

		lease, err := m.Acquire(ctx, "invoice-run",
			leasehold.WithTTL(15*time.Second), // default 30s; renewed every TTL/3 unless WithoutAutoRenew
			leasehold.WithWait(time.Minute))   // default: one attempt; WaitForever: until ctx ends
		switch {
		case errors.Is(err, leasehold.ErrNotAcquired): // someone else has it: a normal outcome
			return nil
		case err != nil: // the backend failed, or ctx ended
			return err
		}
		defer lease.Release(context.WithoutCancel(ctx)) // runs detached anyway; this only bounds the wait

		doWork(lease.Context(), lease.Token()) // Context ends if the lease is lost; pass the token on

		// or, all in one:
		err = m.Do(ctx, "invoice-archive", func(ctx context.Context) error {
			l, _ := leasehold.LeaseFrom(ctx)
			return doWork(ctx, l.Token())
		}, leasehold.WithWait(time.Minute))

		sub := m.Subscribe(64) // every loss, with its cause; Events is closed by m.Close
		go func() {
			for ev := range sub.Events() {
				log.Printf("lost %s: %v (%s)", ev.Name, ev.Err, ev.Reason)
			}
		}()
		// end README
		return err
	}
	fmt.Println("done:", run())
	// Output:
	// working on invoice-run with fencing token 1
	// working on invoice-archive with fencing token 2
	// done: <nil>
}
