package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

// One store per process, shared by every Manager of the process: here two
// owners take a name in turn, each with its own fencing token.
func Example() {
	ctx := context.Background()
	store := memory.New()
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

	lease, err := a.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	fmt.Println(lease.Owner(), "holds", lease.Name(), "with token", lease.Token())
	_, err = b.Acquire(ctx, "nightly-report") // one attempt, no wait
	fmt.Println("worker-b turned away:", errors.Is(err, leasehold.ErrNotAcquired))
	if err := lease.Release(ctx); err != nil {
		panic(err)
	}

	lease, err = b.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	fmt.Println(lease.Owner(), "holds", lease.Name(), "with token", lease.Token())
	// Output:
	// worker-a holds nightly-report with token 1
	// worker-b turned away: true
	// worker-b holds nightly-report with token 2
}
