package etcd_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/etcd/internal/etcdtest"
)

// TestBusyWithLessThanASecondLeft: etcd reports a lease's time left in whole
// seconds rounded down, so a live holding with less than a second left reads
// TTL 0. Another owner's acquire must still be refused at once, with a time
// left of at most a second, not wait in a loop for the key to go (it did:
// a 1s lease renewed every 333ms reads 0 for ever, and the acquire spun).
func TestBusyWithLessThanASecondLeft(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	b := newBackend(t, c.Client())
	ctx := ctxT(t, 30*time.Second)
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o1", Attempt: "a1", TTL: time.Second})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	start := time.Now()
	busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o2", Attempt: "a2", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if busy.Acquired || busy.Holder != "o1" || busy.HolderToken != g.Token {
		t.Fatalf("second owner's Acquire %v after the first: %+v, want refused naming o1 (token %d)", time.Since(start), busy, g.Token)
	}
	if busy.HolderExpiresIn <= 0 || busy.HolderExpiresIn > time.Second {
		t.Errorf("HolderExpiresIn %v, want within (0, 1s]", busy.HolderExpiresIn)
	}
}
