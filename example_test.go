package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

func ExampleManager_Acquire() {
	ctx := context.Background()
	m, err := leasehold.New(memory.New(), leasehold.WithOwner("worker-1"))
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	lease, err := m.Acquire(ctx, "nightly-report", leasehold.WithTTL(10*time.Second))
	if errors.Is(err, leasehold.ErrNotAcquired) {
		fmt.Println("someone else is doing it")
		return
	}
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)

	// Do the work under lease.Context(): it is cancelled if the lease is lost.
	// Pass lease.Token() to the storage you write to, so that it can reject a
	// stale holder's writes.
	fmt.Println("holding", lease.Name(), "as", lease.Owner(), "token", lease.Token())
	// Output: holding nightly-report as worker-1 token 1
}

func ExampleManager_Do() {
	ctx := context.Background()
	m, err := leasehold.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	err = m.Do(ctx, "migrate-schema", func(ctx context.Context) error {
		fmt.Println("migrating, exclusively")
		return nil // ctx is cancelled if the lease is lost meanwhile
	}, leasehold.WithWait(5*time.Second))
	fmt.Println("done:", err)
	// Output:
	// migrating, exclusively
	// done: <nil>
}

func ExampleManager_Subscribe() {
	ctx := context.Background()
	m, err := leasehold.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	sub := m.Subscribe(16)
	defer sub.Close()

	// Without renewal, the lease is lost when its TTL runs out.
	if _, err := m.Acquire(ctx, "shard-7", leasehold.WithTTL(50*time.Millisecond), leasehold.WithoutAutoRenew()); err != nil {
		panic(err)
	}
	ev := <-sub.Events()
	fmt.Println("lost", ev.Name, "token", ev.Token, "reason", ev.Reason, errors.Is(ev.Err, leasehold.ErrLost))
	// Output: lost shard-7 token 1 reason expired true
}

func ExampleLeaseFrom() {
	ctx := context.Background()
	m, err := leasehold.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	_ = m.Do(ctx, "compact-table", func(ctx context.Context) error {
		lease, _ := leasehold.LeaseFrom(ctx) // the lease Do holds: its token fences the writes
		fmt.Println("writing with fencing token", lease.Token())
		return nil
	})
	_, ok := leasehold.LeaseFrom(ctx)
	fmt.Println("outside Do:", ok)
	// Output:
	// writing with fencing token 1
	// outside Do: false
}

func ExampleManager_Inspect() {
	ctx := context.Background()
	store := memory.New()
	worker, _ := leasehold.New(store, leasehold.WithOwner("worker-1"))
	defer worker.Close(ctx)
	observer, _ := leasehold.New(store, leasehold.WithOwner("dashboard"))
	defer observer.Close(ctx)

	if _, err := worker.Acquire(ctx, "partition-17", leasehold.WithMetadata("host=a")); err != nil {
		panic(err)
	}
	info, held, err := observer.Inspect(ctx, "partition-17")
	if err != nil {
		panic(err)
	}
	fmt.Println(held, info.Owner, info.Token, info.Metadata)
	_, held, _ = observer.Inspect(ctx, "partition-18")
	fmt.Println(held)
	// Output:
	// true worker-1 1 host=a
	// false
}
