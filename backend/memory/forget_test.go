package memory

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// names counts what the store keeps per name: exclusive holdings,
// semaphores and queues, in every shard.
func (b *Backend) names() int {
	n := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		n += len(s.leases) + len(s.sems) + len(s.queues)
		s.mu.Unlock()
	}
	return n
}

// TestReleasedNamesLeaveNothing: the store keeps nothing for a name nobody
// holds or waits for. Released names (exclusive and shared, one with a
// waiter that left) go at their release; names whose holders vanished, and
// queues whose waiters did, go once the store's clock passes their expiry;
// and tokens still increase across them (one counter for the store).
func TestReleasedNamesLeaveNothing(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	b := New(WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	ctx := context.Background()
	last := map[string]uint64{}
	for round := range 2 {
		for i := range 2000 {
			key, att := "job "+strconv.Itoa(i), "a"+strconv.Itoa(round)
			g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "alice", Attempt: att, TTL: time.Minute, Limit: 1 + i%2})
			if err != nil || !g.Acquired || g.Token <= last[key] {
				t.Fatalf("Acquire(%q) = %+v, %v; want a grant above token %d", key, g, err, last[key])
			}
			last[key] = g.Token
			if i%10 == 0 {
				// A waiter queues, then leaves.
				q := backend.AcquireRequest{Key: key, Owner: "bob", Attempt: "b" + strconv.Itoa(round), TTL: time.Minute, Limit: 1 + i%2,
					Wait: true, Queue: backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute, Poll: 1}}
				if g, err := b.Acquire(ctx, q); err != nil || g.Acquired || !g.Queued {
					t.Fatalf("queued Acquire(%q) = %+v, %v", key, g, err)
				}
				if err := b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "bob", Attempt: q.Attempt}); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "alice", Attempt: att, Token: g.Token}); err != nil {
				t.Fatal(err)
			}
		}
		if n := b.names(); n != 0 {
			t.Fatalf("round %d: %d names kept after every release", round, n)
		}
	}

	// Holders and waiters that vanish: gone once their expiry passes.
	for i := range 100 {
		key := "crashed " + strconv.Itoa(i)
		if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "alice", Attempt: "a", TTL: time.Minute, Limit: 1 + i%2}); err != nil || !g.Acquired {
			t.Fatal(g, err)
		}
		q := backend.AcquireRequest{Key: key, Owner: "bob", Attempt: "b", TTL: time.Minute, Limit: 1 + i%2,
			Wait: true, Queue: backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute, Poll: 1}}
		if g, err := b.Acquire(ctx, q); err != nil || !(g.Queued || g.Acquired && q.Limit > 1) {
			t.Fatal(g, err) // queued, or given a shared name's second slot
		}
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if n := b.Len(); n != 0 {
		t.Fatalf("Len() = %d after every expiry", n)
	}
	if n := b.names(); n != 0 {
		t.Fatalf("%d names kept after every expiry", n)
	}
}
