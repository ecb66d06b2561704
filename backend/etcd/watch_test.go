package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/etcd/internal/etcdtest"
)

// TestWaitersWakeByWatch: a waiter on a name held for a minute gets it within
// moments of its release: the deletion reaches it through the release watch
// (without it, it would poll at the holder's expiry, a minute away). A waiter
// on a holding whose lease ends on the server (a holder that stopped
// renewing) gets it too: the lease takes the key with it.
func TestWaitersWakeByWatch(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	b := newBackend(t, c.Client())
	holder := newManager(t, b, "holder")
	waiter := newManager(t, newBackend(t, c.Client()), "waiter")

	l, err := holder.Acquire(ctxT(t, 10*time.Second), "released", leasehold.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// A holding whose lease is short and never renewed (a crashed process,
	// as the store sees it).
	short := backend.AcquireRequest{Key: "expired", Owner: "crashed", Attempt: "a1", TTL: time.Second}
	if g, err := b.Acquire(ctxT(t, 10*time.Second), short); err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	got := make(chan string, 2)
	for _, name := range []string{"released", "expired"} {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			w, err := waiter.Acquire(ctx, name, leasehold.WithWait(leasehold.WaitForever))
			if err != nil {
				t.Errorf("waiter on %s: %v", name, err)
				got <- ""
				return
			}
			got <- w.Name()
		}()
	}
	released := time.Now()
	if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case name := <-got:
			// The expired one: 1s lease, checked by the leader every 500ms.
			if d := time.Since(released); d > 5*time.Second {
				t.Errorf("%s handed over after %v", name, d)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a waiter was not woken")
		}
	}
}
