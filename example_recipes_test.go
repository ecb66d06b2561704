package leasehold_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/partition"
)

// The Go blocks of docs/recipes.md.

func Example_recipeElection() {
	ctx, stop := context.WithCancel(context.Background())
	m, _ := leasehold.New(memory.New(), leasehold.WithOwner("scheduler-1"))
	defer m.Close(context.Background())

	err := election.Run(ctx, m, "scheduler", election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			l, _ := leasehold.LeaseFrom(ctx)
			fmt.Println("leading, token > 0:", l.Token() > 0)
			stop() // a real leader works until ctx ends, then returns
		},
	})
	fmt.Println("Run:", err)
	// Output:
	// leading, token > 0: true
	// Run: <nil>
}

func Example_recipeLimit() {
	ctx := context.Background()
	m, _ := leasehold.New(memory.New())
	defer m.Close(ctx)
	var running, most atomic.Int64
	export := func(context.Context) error {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		running.Add(-1)
		return nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			// At most 3 exports run at once across the fleet; the others queue.
			err := m.Do(ctx, "exports", func(ctx context.Context) error {
				return export(ctx)
			}, leasehold.WithLimit(3), leasehold.WithWait(leasehold.WaitForever))
			if err != nil {
				fmt.Println(err)
			}
		})
	}
	wg.Wait()
	fmt.Println("at most 3 at once:", most.Load() <= 3)
	// Output:
	// at most 3 at once: true
}

func Example_recipePartition() {
	m, _ := leasehold.New(memory.New())
	defer m.Close(context.Background())
	consume := func(ctx context.Context, shard string) { <-ctx.Done() }
	var owned []string
	run := func(ctx context.Context) error {
		shards := []string{"shard-0", "shard-1", "shard-2", "shard-3"}
		member, err := partition.Join(ctx, m, "orders", shards, partition.Callbacks{
			OnAssigned: func(ctx context.Context, shard string) {
				consume(ctx, shard) // until ctx ends: the shard moved, or the lease was lost
			},
		})
		if err != nil {
			return err
		}
		defer member.Leave(context.WithoutCancel(ctx))
		owned = member.Owned() // a lone member owns every shard
		return nil
	}
	fmt.Println(run(context.Background()), len(owned))
	// Output:
	// <nil> 4
}
