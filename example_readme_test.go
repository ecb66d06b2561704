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
	const maxHeld = 1000 // the most leases this process holds at once
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

		// One slot per lease held: if the store goes away, all are lost within
		// a renewal period, and a full buffer drops (Dropped counts them).
		sub := m.Subscribe(maxHeld) // every loss, with its cause; Events is closed by m.Close
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

// The README's WithLimit block, verbatim between the markers.
func Example_withLimit() {
	ctx := context.Background()
	m, _ := leasehold.New(memory.New(), leasehold.WithOwner("render-1"))
	defer m.Close(ctx)
	for range 3 { // three holders already
		if _, err := m.Acquire(ctx, "gpu-pool", leasehold.WithLimit(3)); err != nil {
			panic(err)
		}
	}
	run := func() error {
		// README: WithLimit
		l, err := m.Acquire(ctx, "gpu-pool", leasehold.WithLimit(3), // up to 3 holders at once, across every Manager
			leasehold.WithWait(10*time.Millisecond))
		var mismatch *leasehold.LimitMismatchError
		switch {
		case errors.Is(err, leasehold.ErrNotAcquired): // all 3 slots stayed taken: a normal outcome
			return err
		case errors.As(err, &mismatch): // another holder uses another limit: a bug to fix
			return err
		case err != nil:
			return err
		}
		defer l.Release(context.WithoutCancel(ctx)) // hands the slot to the first waiter at once
		// end README
		return nil
	}
	var busy *leasehold.NotAcquiredError
	if err := run(); errors.As(err, &busy) {
		fmt.Println("busy: the first of", busy.Limit, "slots to end is", busy.Holder+"'s")
	}
	hs, _ := m.Holders(ctx, "gpu-pool") // every holding, whoever holds it, by token
	for _, h := range hs {
		fmt.Println(h.Owner, h.Token, h.Limit)
	}
	_, err := m.Acquire(ctx, "gpu-pool", leasehold.WithLimit(4))
	fmt.Println(err)
	// Output:
	// busy: the first of 3 slots to end is render-1's
	// render-1 1 3
	// render-1 2 3
	// render-1 3 3
	// leasehold: acquire "gpu-pool" with limit 4: its live holdings were granted with limit 3 (every holder of a name must use the same limit)
}
