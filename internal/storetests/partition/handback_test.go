package partition_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/internal/storetests/localstore"
	"github.com/leasehold/leasehold/partition"
)

// testLeave: Leave hands every item back and returns once it has; the other
// member owns everything promptly, not at the TTL, and every lease the
// leaver had ended released, not expired.
func testLeave(t *testing.T, b backend.Backend, group string) {
	const ttl = 10 * time.Second // a takeover at the TTL would be plain to see
	f := newFleet(t, b, group, 100,
		partition.WithTTL(ttl), partition.WithRebalanceEvery(50*time.Millisecond), partition.WithGrace(ttl))
	f.join(0)
	f.join(1)
	poll.Until(t, "2 members sharing 100 items", patience, func() bool { return f.fair(0, 1) })

	leaving := f.nodes[0]
	start := time.Now()
	if err := leaving.mem.Leave(context.Background()); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	left := time.Since(start)
	select {
	case <-leaving.mem.Done():
	default:
		t.Error("Done is open after Leave returned")
	}
	if err := leaving.mem.Err(); err != nil {
		t.Errorf("Err after Leave = %v", err)
	}
	if owned, held := leaving.mem.Owned(), leaving.m.Held(); len(owned) != 0 || len(held) != 0 {
		t.Errorf("after Leave: owns %v, holds %v", owned, held)
	}
	poll.Until(t, "the other member owning all 100 items", patience, func() bool { return f.fair(1) })
	took := time.Since(start)
	t.Logf("Leave returned after %v; the other member owned everything after %v (TTL %v)", left, took, ttl)
	if took > 3*time.Second {
		t.Errorf("the takeover after Leave took %v: not prompt (TTL %v)", took, ttl)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for item, ls := range f.leases {
		for _, l := range ls {
			if l.Owner() == leaving.owner && !errors.Is(l.Err(), leasehold.ErrReleased) {
				t.Errorf("%s: the leaver's lease ended with %v; want ErrReleased", item, l.Err())
			}
		}
	}
	if f.revoked != f.assigned-len(f.nodes[1].mem.Owned()) {
		t.Errorf("%d OnRevoked for %d OnAssigned and %d items still owned", f.revoked, f.assigned, len(f.nodes[1].mem.Owned()))
	}
}

func TestLeaveOnMemory(t *testing.T) { testLeave(t, memory.New(), "leave") }

func TestLeaveOnRedis(t *testing.T) { testLeave(t, localstore.Redis(t), uniqueGroup("leave")) }

func TestLeaveOnPostgres(t *testing.T) {
	testLeave(t, localstore.Postgres(t, "partition_test"), uniqueGroup("leave"))
}

// Handing an item back waits for its callback to return (here 150 ms after
// its ctx ended) before releasing the lease: the next owner's callback never
// starts while the old one's runs (the fleet's checker), and the old lease
// ends released, not expired.
func TestHandBackWaitsForTheCallback(t *testing.T) {
	const hold = 150 * time.Millisecond
	f := newFleet(t, memory.New(), "slow", 20,
		partition.WithTTL(time.Second), partition.WithRebalanceEvery(20*time.Millisecond), partition.WithGrace(5*time.Second))
	f.hold = hold
	f.join(0)
	poll.Until(t, "one member owning 20 items", patience, func() bool { return f.fair(0) })
	start := time.Now()
	f.join(1)
	poll.Until(t, "2 members sharing 20 items", patience, func() bool { return f.fair(0, 1) })
	if took := time.Since(start); took < hold {
		t.Errorf("items moved in %v, before their callbacks could return (%v)", took, hold)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	moved := 0
	for item, ls := range f.leases {
		for _, l := range ls[:len(ls)-1] {
			moved++
			if !errors.Is(l.Err(), leasehold.ErrReleased) {
				t.Errorf("%s: a handed-back lease ended with %v; want ErrReleased", item, l.Err())
			}
		}
	}
	if moved != 10 {
		t.Errorf("%d items moved; want 10", moved)
	}
}
