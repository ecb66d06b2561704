// Command quickstart shows the basics of leasehold on the embedded memory
// backend: acquire a lease, work under it, see a second owner turned away,
// release it, and watch a lease get lost.
//
//	go -C examples run ./quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

func main() {
	ctx := context.Background()
	store := memory.New() // one store, shared by two "instances" below

	alice, err := leasehold.New(store, leasehold.WithOwner("alice"))
	if err != nil {
		log.Fatal(err)
	}
	defer alice.Close(ctx)
	bob, err := leasehold.New(store, leasehold.WithOwner("bob"))
	if err != nil {
		log.Fatal(err)
	}
	defer bob.Close(ctx)

	// 1. Alice takes the lease. It is renewed in the background until released.
	lease, err := alice.Acquire(ctx, "invoice-run", leasehold.WithTTL(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("alice holds %q with fencing token %d until %s\n",
		lease.Name(), lease.Token(), lease.ExpiresAt().Format(time.TimeOnly))

	// 2. Bob tries once: busy is a normal outcome, not a fault.
	_, err = bob.Acquire(ctx, "invoice-run")
	var busy *leasehold.NotAcquiredError
	if errors.As(err, &busy) {
		fmt.Printf("bob: not acquired, %s holds it\n", busy.Holder)
	}

	// 3. Bob waits; Alice finishes her work and releases; Bob gets it at once.
	got := make(chan *leasehold.Lease)
	go func() {
		l, err := bob.Acquire(ctx, "invoice-run", leasehold.WithWait(5*time.Second))
		if err != nil {
			log.Fatal(err)
		}
		got <- l
	}()
	time.Sleep(100 * time.Millisecond) // alice "works"
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	bobs := <-got
	fmt.Printf("alice released (handle now says: %v)\n", lease.Err())
	fmt.Printf("bob holds it with token %d (greater than %d: stale writes can be fenced)\n", bobs.Token(), lease.Token())
	_ = bobs.Release(ctx)

	// 4. Loss: a lease that is not renewed ends at its TTL. The handle's
	// Context is cancelled and subscribers are told.
	sub := alice.Subscribe(8)
	short, err := alice.Acquire(ctx, "cache-warmup", leasehold.WithTTL(200*time.Millisecond), leasehold.WithoutAutoRenew())
	if err != nil {
		log.Fatal(err)
	}
	<-short.Context().Done()
	ev := <-sub.Events()
	fmt.Printf("lost %q (token %d), reason %s: %v\n", ev.Name, ev.Token, ev.Reason, context.Cause(short.Context()))
}
