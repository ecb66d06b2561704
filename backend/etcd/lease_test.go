package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/poll"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold"
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

// TestCloseWithAnEndedContextLeavesLeasesToTheirTTL: a Manager closed with a
// context that has already ended (after SIGTERM) releases nothing; etcd ends
// its leases by their TTL, and another owner gets each name then, not before.
func TestCloseWithAnEndedContextLeavesLeasesToTheirTTL(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	m, err := leasehold.New(newBackend(t, c.Client()), leasehold.WithOwner("closing"))
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	ls, _ := acquireAll(t, m, 3, ttl)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	closed := time.Now()
	_ = m.Close(ended) // context.Canceled: the releases were left to etcd
	other := newManager(t, newBackend(t, c.Client()), "other")
	for _, l := range ls {
		if !errors.Is(l.Err(), leasehold.ErrReleased) {
			t.Errorf("%s after Close: %v, want ErrReleased", l.Name(), l.Err())
		}
		nl, err := other.Acquire(ctxT(t, 20*time.Second), l.Name(), leasehold.WithWait(15*time.Second))
		if err != nil {
			t.Fatalf("%s after its holder closed: %v", l.Name(), err)
		}
		if nl.Token() <= l.Token() {
			t.Errorf("%s: token %d after %d", l.Name(), nl.Token(), l.Token())
		}
	}
	// Not before the TTL: the last renewal (or the acquire) was at most a
	// renewal period (TTL/3) before Close.
	if d := time.Since(closed); d < ttl-ttl/3-100*time.Millisecond {
		t.Errorf("the names were granted again %v after Close, before their TTL %v could end", d, ttl)
	}
}

// TestInspectEndedLeaseIsNotHeld: etcd reads a lease's TTL as 0 from its
// last second until the leader has deleted its key, up to a second past its
// end. Inspect and List must not show such a key as held (they showed it
// with "1s left").
func TestInspectEndedLeaseIsNotHeld(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	cli := c.Client()
	b := newBackend(t, cli)
	ctx := ctxT(t, 30*time.Second)
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o1", Attempt: "a1", TTL: 2 * time.Second})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	// Only the server can tell when its TTL reads 0: ask it, never more
	// than the lease's 2 s plus the leader's deletion delay.
	poll.Until(t, "the lease's TTL to read 0 with its key still there", 10*time.Second, func() bool {
		resp, err := cli.Get(ctx, "leasehold/\x00k")
		if err != nil || len(resp.Kvs) == 0 {
			t.Fatalf("the key went before its TTL read 0 (or the read failed: %v)", err)
		}
		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
		return err == nil && ttl.TTL <= 0
	})
	if h, held, err := b.Inspect(ctx, "k"); err != nil || held {
		t.Errorf("Inspect with the lease's TTL at 0: %+v, held %v, %v; want not held", h, held, err)
	}
	err = b.List(ctx, "", func(h backend.Holder) bool {
		t.Errorf("List with the lease's TTL at 0 shows %+v", h)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}
