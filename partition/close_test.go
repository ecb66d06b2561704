package partition_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/partition"
)

// Manager.Close on a member ends an item's OnAssigned and waits for it
// (within the grace) before the item's lease is released: while the
// callback finishes, honouring its ctx, the store still has the item held
// by that member, so no other member can start the item's callback.
func TestManagerCloseReleasesAfterTheCallback(t *testing.T) {
	store := memory.New()
	m := newManager(t, store, "node-a")
	type outcome struct {
		name        string
		windingDown bool // the callback saw its ctx end while the lease was held
		heldBy      bool // the store kept the item for it until it returned
	}
	started := make(chan struct{})
	result := make(chan outcome, 1)
	_, err := partition.Join(context.Background(), m, "g", []string{"x"}, partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) {
			l, _ := leasehold.LeaseFrom(ctx)
			close(started)
			<-ctx.Done()
			// Finishing inside the grace: the item must stay this member's.
			held := poll.Throughout(300*time.Millisecond, func() bool {
				h, ok, err := store.Inspect(context.Background(), l.Name())
				return err == nil && ok && h.Token == l.Token()
			})
			result <- outcome{name: l.Name(), windingDown: l.Err() == nil, heldBy: held}
		},
	}, partition.WithGrace(patience), partition.WithRebalanceEvery(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	await(t, "OnAssigned starting", started)
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	got := await(t, "OnAssigned returning", result)
	if !got.heldBy {
		t.Error("the item's lease was released while its OnAssigned still ran after Manager.Close")
	}
	if !got.windingDown {
		t.Error("the handle had ended while OnAssigned still ran; want it held until the callback returned")
	}
	if err := await(t, "Close returning", closed); err != nil {
		t.Errorf("Close = %v", err)
	}
	if _, held, _ := store.Inspect(context.Background(), got.name); held {
		t.Error("an item is still held after Close")
	}
}
