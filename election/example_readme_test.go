package election_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/election"
)

// The Go block of docs/election.md, verbatim between the markers
// (readme_test.go in the root package checks it). lead resigns at once, which ends Run.
func Example_readme() {
	m, newErr := leasehold.New(memory.New(), leasehold.WithOwner("node-a"))
	if newErr != nil {
		panic(newErr)
	}
	defer m.Close(context.Background())
	ctx, resign := context.WithCancel(context.Background())
	lead := func(ctx context.Context) {
		fmt.Println("leading")
		resign()
		<-ctx.Done()
	}

	// docs/election.md
	err := election.Run(ctx, m, "scheduler", election.Callbacks{
		OnStartedLeading: func(ctx context.Context) { lead(ctx) }, // ctx ends the moment leadership ends
		OnStoppedLeading: func() { log.Print("no longer leading") },
		OnNewLeader:      func(id string) { log.Print("leader: ", id) },
	}, leasehold.WithTTL(10*time.Second))
	id, ok, err := election.Leader(ctx, m, "scheduler") // who leads now
	// end docs
	// Run returned because its ctx ended; so does the Leader call under it.
	fmt.Printf("after Run: leader %q %v, ctx ended: %v\n", id, ok, errors.Is(err, context.Canceled))
	// Output:
	// leading
	// after Run: leader "" false, ctx ended: true
}
