package partition_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/partition"
)

// Two members share four items: the first owns all of them until the second
// joins, then hands back the two it weighs least (each once its callback
// has returned), and takes them again when the second leaves.
func ExampleJoin() {
	ctx := context.Background()
	store := memory.New()
	a, _ := leasehold.New(store, leasehold.WithOwner("node-a"))
	defer a.Close(ctx)
	b, _ := leasehold.New(store, leasehold.WithOwner("node-b"))
	defer b.Close(ctx)

	items := []string{"p-0", "p-1", "p-2", "p-3"}
	took := map[string]chan string{"node-a": make(chan string, 8), "node-b": make(chan string, 8)}
	callbacks := func(owner string) partition.Callbacks {
		return partition.Callbacks{OnAssigned: func(ctx context.Context, item string) {
			lease, _ := leasehold.LeaseFrom(ctx) // the item's lease: pass lease.Token() to what you write
			_ = lease.Token()
			took[owner] <- item
			<-ctx.Done() // work on item until it moves on
		}}
	}
	opts := []partition.Option{partition.WithTTL(10 * time.Second), partition.WithRebalanceEvery(10 * time.Millisecond)}

	first, err := partition.Join(ctx, a, "ingest", items, callbacks("node-a"), opts...)
	if err != nil {
		panic(err)
	}
	fmt.Println("node-a alone:", first.Owned())

	second, err := partition.Join(ctx, b, "ingest", items, callbacks("node-b"), opts...)
	if err != nil {
		panic(err)
	}
	<-took["node-b"]
	<-took["node-b"]
	fmt.Println("node-a:", first.Owned(), "node-b:", second.Owned())

	_ = second.Leave(ctx) // hands its items back
	for range 4 + 2 {     // node-a's first four, and the two it takes back
		<-took["node-a"]
	}
	fmt.Println("node-b left; node-a:", first.Owned())
	_ = first.Leave(ctx)
	// Output:
	// node-a alone: [p-0 p-1 p-2 p-3]
	// node-a: [p-2 p-3] node-b: [p-0 p-1]
	// node-b left; node-a: [p-0 p-1 p-2 p-3]
}
