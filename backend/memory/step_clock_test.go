package memory

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// TestHandOffWindowFromItsStep: a hand-off lasts its pickup window from the
// release that makes it, on the store's clock at that step. The engine counts
// a hand-off's local deadline from when it sent the last poll the store had
// handled before the hand-off (HandOff.Poll): a window counted from a
// reading of the clock older than that poll would end on the store before
// the new holder's local deadline, and the store would give the key to a
// third attempt while the new holder still holds it.
//
// The clock is read by the release. If that reading is taken outside the
// key's lock, the test slips a poll in between the reading and the step:
// time passes, and the waiter polls again (refused: the holder still holds).
// Read within the step, there is no such gap, and the release goes alone.
func TestHandOffWindowFromItsStep(t *testing.T) {
	const key, pickup = "k", time.Second
	var (
		mu     sync.Mutex
		now    = time.Unix(1_000_000, 0)
		onRead func() // runs once, at the next reading of the clock
	)
	b := New(WithClock(func() time.Time {
		mu.Lock()
		at, f := now, onRead
		onRead = nil
		mu.Unlock()
		if f != nil {
			f()
		}
		return at
	}))
	ctx := context.Background()

	var hmu sync.Mutex
	var handed []backend.HandOff
	wctx, stop := context.WithCancel(ctx)
	ready, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		_ = b.WatchHandOffs(wctx, "b.addr", func(h backend.HandOff) {
			hmu.Lock()
			handed = append(handed, h)
			hmu.Unlock()
		}, func() { close(ready) })
	}()
	defer func() { stop(); <-watched }()
	<-ready

	if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "a", Attempt: "a.1", TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire by a = %+v, %v; want a grant", g, err)
	}
	pollAt := map[uint64]time.Time{} // the store's clock when it handled each poll
	poll := func(n uint64) {
		mu.Lock()
		pollAt[n] = now
		mu.Unlock()
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "b", Attempt: "b.1", TTL: time.Minute, Wait: true,
			Queue: backend.QueueRequest{EntryTTL: time.Minute, Pickup: pickup, Notify: "b.addr", Poll: n}})
		if err != nil || g.Acquired || !g.Queued {
			t.Fatalf("poll %d by b = %+v, %v; want a refusal that keeps b queued (a holds the key)", n, g, err)
		}
	}
	poll(1)

	mu.Lock()
	onRead = func() {
		s := b.shard(key)
		if !s.mu.TryLock() {
			return // read within the step: nothing can come in between
		}
		s.mu.Unlock()
		mu.Lock()
		now = now.Add(5 * time.Second)
		mu.Unlock()
		poll(2)
	}
	mu.Unlock()
	if err := b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "a", Attempt: "a.1"}); err != nil {
		t.Fatalf("Release by a: %v", err)
	}

	hmu.Lock()
	defer hmu.Unlock()
	if len(handed) != 1 || handed[0].Attempt != "b.1" {
		t.Fatalf("hand-offs = %+v; want one, to b.1", handed)
	}
	h := handed[0]
	want := pollAt[h.Poll].Add(pickup)
	got, held, err := b.Inspect(ctx, key)
	switch {
	case err != nil:
		t.Fatalf("Inspect: %v", err)
	case !held || got.Token != h.Token:
		t.Fatalf("right after the release, the store holds %+v (held %v); want the hand-off of token %d, made after poll %d, held until %v",
			got, held, h.Token, h.Poll, want)
	case got.ExpiresAt.Before(want):
		t.Fatalf("the hand-off of token %d, made after poll %d, expires at %v; want no earlier than %v (that poll plus the pickup window)",
			h.Token, h.Poll, got.ExpiresAt, want)
	}
}
