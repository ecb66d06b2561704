package election_test

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/election"
)

func ExampleRun() {
	m, err := leasehold.New(memory.New(), leasehold.WithOwner("node-a"))
	if err != nil {
		panic(err)
	}
	defer m.Close(context.Background())

	ctx, resign := context.WithCancel(context.Background())
	err = election.Run(ctx, m, "scheduler", election.Callbacks{
		OnNewLeader: func(id string) { fmt.Println("leader:", id) },
		OnStartedLeading: func(ctx context.Context) {
			lease, _ := leasehold.LeaseFrom(ctx)
			fmt.Println("leading with fencing token", lease.Token())
			resign() // a real leader works until ctx ends (leadership lost, or Run's ctx)
			<-ctx.Done()
		},
		OnStoppedLeading: func() { fmt.Println("stopped leading") },
	})
	fmt.Println("Run returned", err)
	// Output:
	// leader: node-a
	// leading with fencing token 1
	// stopped leading
	// Run returned <nil>
}

func ExampleLeader() {
	store := memory.New()
	node, _ := leasehold.New(store, leasehold.WithOwner("node-a"))
	defer node.Close(context.Background())
	observer, _ := leasehold.New(store, leasehold.WithOwner("dashboard"))
	defer observer.Close(context.Background())

	_, ok, _ := election.Leader(context.Background(), observer, "scheduler")
	fmt.Println("leader before:", ok)
	if _, err := node.Acquire(context.Background(), "scheduler"); err != nil { // as Run does
		panic(err)
	}
	id, ok, _ := election.Leader(context.Background(), observer, "scheduler")
	fmt.Println("leader now:", id, ok)
	// Output:
	// leader before: false
	// leader now: node-a true
}
