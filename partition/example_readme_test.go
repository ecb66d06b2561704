package partition_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/partition"
)

// The README's partition block, verbatim between the markers (readme_test.go
// in the root package checks it): run is the function the README's code is
// the body of. Alone in the group, the member owns every item.
func Example_readme() {
	ctx := context.Background()
	m, newErr := leasehold.New(memory.New(), leasehold.WithOwner("ingest-7f9c"))
	if newErr != nil {
		panic(newErr)
	}
	defer m.Close(ctx)
	consume := func(ctx context.Context, item string) { <-ctx.Done() }
	run := func() error {
		// README: Partitions
		items := []string{"orders-0", "orders-1", "orders-2"} // the same items in every process
		mem, err := partition.Join(ctx, m, "ingest", items, partition.Callbacks{
			OnAssigned: func(ctx context.Context, item string) { consume(ctx, item) }, // until ctx ends: the item moves on
			OnRevoked:  func(item string) { log.Print("gave up ", item) },
		}, partition.WithTTL(10*time.Second), partition.WithGrace(20*time.Second))
		if err != nil {
			return err
		}
		defer mem.Leave(context.WithoutCancel(ctx)) // hands every item back, each once its OnAssigned has returned
		fmt.Println("mine now:", mem.Owned())
		// end README
		return nil
	}
	fmt.Println("done:", run())
	// Output:
	// mine now: [orders-0 orders-1 orders-2]
	// done: <nil>
}
