package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/poll"
)

// TestSweepClearsAbandonedNames: the rows of a name whose holding and queue
// entry expired and that nobody uses again (its lock row, its holding, its
// queue entry) go at a later Acquire of another name; a live name keeps its
// rows; and tokens go on increasing after the holding with the highest
// token was deleted.
func TestSweepClearsAbandonedNames(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 10))
	ctx := context.Background()
	acquire := func(key, attempt string, ttl time.Duration, q backend.QueueRequest) backend.Grant {
		t.Helper()
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "o-" + attempt, Attempt: attempt, TTL: ttl, Wait: q != backend.QueueRequest{}, Queue: q})
		if err != nil {
			t.Fatalf("acquire %s by %s: %v", key, attempt, err)
		}
		return g
	}
	live := acquire("live", "a-live", time.Hour, backend.QueueRequest{})
	held := acquire("abandoned", "a-holder", 300*time.Millisecond, backend.QueueRequest{})
	if !live.Acquired || !held.Acquired {
		t.Fatalf("grants %+v, %+v", live, held)
	}
	if g := acquire("abandoned", "a-waiter", time.Second, backend.QueueRequest{EntryTTL: 50 * time.Millisecond, Pickup: time.Second, Poll: 1}); g.Acquired || !g.Queued {
		t.Fatalf("the waiter was not queued: %+v", g)
	}
	if n := e.rowsOf(t, "abandoned"); n != 3 {
		t.Fatalf("%d rows of the abandoned name before it expired, want 3 (lock, holding, entry)", n)
	}
	// Both expire on the server's clock (the entry first, the holding 300ms
	// after its grant).
	poll.Until(t, "the abandoned holding expiring", 30*time.Second, func() bool {
		h, err := b.Holders(ctx, "abandoned")
		return err == nil && len(h) == 0
	})
	next := acquire("trigger", "a-trigger", time.Hour, backend.QueueRequest{})
	if n := e.rowsOf(t, "abandoned"); n != 0 {
		t.Errorf("%d rows of the expired, abandoned name remain after a sweep", n)
	}
	if n := e.rowsOf(t, "live"); n != 2 {
		t.Errorf("%d rows of the live name, want 2 (lock, holding)", n)
	}
	if next.Token <= held.Token {
		t.Errorf("token %d after the sweep, not above the deleted holding's %d", next.Token, held.Token)
	}
}

// rowsOf counts the rows of key in the three tables.
func (e *testEnv) rowsOf(t *testing.T, key string) int {
	t.Helper()
	n, _ := newNames(e.schema, e.table)
	total := 0
	for _, tb := range []string{n.leases, n.holds, n.queue} {
		var c int
		if err := e.db.QueryRow("SELECT COUNT(*) FROM "+tb+" WHERE name = ?", key).Scan(&c); err != nil {
			t.Fatal(err)
		}
		total += c
	}
	return total
}
