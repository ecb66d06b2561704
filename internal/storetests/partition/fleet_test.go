package partition_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/internal/storetests/localstore"
	"github.com/leasehold/leasehold/partition"
)

// fleet is a group of members in this process, each on a Manager of its own
// through its own Faulty (to cut one off from the store), and an independent
// checker of what their callbacks saw.
type fleet struct {
	t     *testing.T
	b     backend.Backend
	group string
	items []string
	opts  []partition.Option
	nodes map[int]*node

	mu       sync.Mutex
	running  map[string]int                // item → the member whose OnAssigned runs
	leases   map[string][]*leasehold.Lease // item → every holding of it, in order
	started  map[*leasehold.Lease]time.Time
	inCall   map[[2]string]bool // (member, item) → its OnAssigned has not returned
	assigned int                // OnAssigned calls, every member
	revoked  int                // OnRevoked calls, every member
	hold     time.Duration      // how long OnAssigned goes on after its ctx ends
}

type node struct {
	i     int
	owner string
	fault *backendtest.Faulty
	m     *leasehold.Manager
	mem   *partition.Member
}

func newFleet(t *testing.T, b backend.Backend, group string, n int, opts ...partition.Option) *fleet {
	f := &fleet{
		t: t, b: b, group: group, opts: opts, nodes: map[int]*node{},
		running: map[string]int{}, leases: map[string][]*leasehold.Lease{}, inCall: map[[2]string]bool{},
		started: map[*leasehold.Lease]time.Time{},
	}
	f.items = fleetItems(n)
	return f
}

// fleetItems are the n items of a fleet (a child process makes the same).
func fleetItems(n int) []string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("item-%03d", i)
	}
	return items
}

// join starts member i on a Manager of its own.
func (f *fleet) join(i int) *node {
	f.t.Helper()
	fault, wrapped := backendtest.Wrap(f.b)
	owner := fmt.Sprint("member-", i)
	m, err := leasehold.New(wrapped, leasehold.WithOwner(owner))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = m.Close(context.Background()) })
	mem, err := partition.Join(context.Background(), m, f.group, f.items, partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) { f.onAssigned(owner, ctx, item) },
		OnRevoked:  func(item string) { f.onRevoked(owner, item) },
	}, f.opts...)
	if err != nil {
		f.t.Fatalf("Join %s: %v", owner, err)
	}
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := mem.Leave(ctx); err != nil {
			f.t.Errorf("Leave %s: %v", owner, err)
		}
	})
	n := &node{i: i, owner: owner, fault: fault, m: m, mem: mem}
	f.nodes[i] = n
	return n
}

// onAssigned checks, as the item changes hands, that no earlier holding of
// it is live on its own handle's deadline (Lease.Err turns non-nil at the
// local deadline, whether or not anyone noticed), that the tokens increase,
// and that no other member's callback for it still runs; then it works
// until ctx ends.
func (f *fleet) onAssigned(owner string, ctx context.Context, item string) {
	l, ok := leasehold.LeaseFrom(ctx)
	f.mu.Lock()
	switch {
	case !ok || l.Token() == 0:
		f.t.Errorf("%s: %s: LeaseFrom(ctx) = %v, %v", owner, item, l, ok)
	case l.Name() != f.group+"/items/"+item:
		f.t.Errorf("%s: %s: the lease is %q", owner, item, l.Name())
	}
	if other, busy := f.running[item]; busy {
		f.t.Errorf("%s: %s: OnAssigned started while member-%d's still runs", owner, item, other)
	}
	for _, prev := range f.leases[item] {
		if prev.Err() == nil {
			f.t.Errorf("%s: %s: two live owners: %s (token %d) still holds it", owner, item, prev.Owner(), prev.Token())
		}
		if ok && prev.Token() >= l.Token() {
			f.t.Errorf("%s: %s: token %d after %d", owner, item, l.Token(), prev.Token())
		}
	}
	var idx int
	fmt.Sscanf(owner, "member-%d", &idx)
	f.running[item] = idx
	if ok {
		f.leases[item] = append(f.leases[item], l)
		f.started[l] = time.Now()
	}
	f.inCall[[2]string{owner, item}] = true
	f.assigned++
	hold := f.hold
	f.mu.Unlock()

	<-ctx.Done()
	if hold > 0 {
		time.Sleep(hold) // clean-up that takes its time: the next owner must wait for it
	}
	f.mu.Lock()
	delete(f.running, item)
	f.inCall[[2]string{owner, item}] = false
	f.mu.Unlock()
}

func (f *fleet) onRevoked(owner, item string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	running, known := f.inCall[[2]string{owner, item}]
	if !known || running {
		f.t.Errorf("%s: OnRevoked(%s) while its OnAssigned runs (%v) or was never called (%v)", owner, item, running, !known)
	}
	delete(f.inCall, [2]string{owner, item})
	f.revoked++
}

// moves is the number of OnAssigned calls so far: after the first
// convergence, each is an item changing hands.
func (f *fleet) moves() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.assigned
}

// shares is how many items each of the given members owns, and whether
// together they own every item exactly once, each with its OnAssigned
// running (a callback starts on its own goroutine, just after the member
// counts the item as owned).
func (f *fleet) shares(members ...int) (counts []int, complete bool) {
	seen := map[string]int{}
	started := true
	for _, i := range members {
		owned := f.nodes[i].mem.Owned()
		counts = append(counts, len(owned))
		f.mu.Lock()
		for _, it := range owned {
			seen[it]++
			if r, ok := f.running[it]; !ok || r != i {
				started = false
			}
		}
		f.mu.Unlock()
	}
	if !started {
		return counts, false
	}
	if len(seen) != len(f.items) {
		return counts, false
	}
	for _, n := range seen {
		if n != 1 {
			return counts, false
		}
	}
	return counts, true
}

// fair reports whether members own every item between them, each its
// share: ⌊N/M⌋ or ⌈N/M⌉.
func (f *fleet) fair(members ...int) bool {
	counts, complete := f.shares(members...)
	lo := len(f.items) / len(members)
	hi := (len(f.items) + len(members) - 1) / len(members)
	for _, c := range counts {
		if c < lo || c > hi {
			return false
		}
	}
	return complete
}

// steady lets every member make a few more rounds and checks that nothing
// moved meanwhile. A member at its share makes a round every rebalance
// period; outside the package there is no count of rounds to wait for (the
// package's own tests have one), so steady waits four periods: three rounds
// and a period's slack. A loaded machine may fit fewer rounds in; the checks
// are the same.
func (f *fleet) steady(rebalance time.Duration, members ...int) {
	f.t.Helper()
	before := f.moves()
	time.Sleep(4 * rebalance) // the rounds' own period: there is nothing to wait on
	if moved := f.moves() - before; moved != 0 {
		f.t.Errorf("a stable group moved %d items in four rebalance periods", moved)
	}
	if !f.fair(members...) {
		counts, complete := f.shares(members...)
		f.t.Errorf("a stable group's shares changed: %v (every item owned once: %v)", counts, complete)
	}
}

// testFleet: 3 members × 100 items converge to 33–34 each; a 4th joins and
// about 25 items move (25 each); one is cut off from the store and the
// others own everything within its TTL, one renew period and a rebalance
// period; it comes back and rejoins. The checker runs throughout.
func testFleet(t *testing.T, b backend.Backend, group string, ttl, rebalance time.Duration) {
	f := newFleet(t, b, group, 100,
		partition.WithTTL(ttl), partition.WithRebalanceEvery(rebalance), partition.WithGrace(ttl))
	for i := range 3 {
		f.join(i)
	}
	took := poll.Until(t, "3 members sharing 100 items", patience, func() bool { return f.fair(0, 1, 2) })
	counts, _ := f.shares(0, 1, 2)
	t.Logf("3 members: shares %v after %v", counts, took)
	f.steady(rebalance, 0, 1, 2)

	before := f.moves()
	f.join(3)
	took = poll.Until(t, "4 members sharing 100 items", patience, func() bool { return f.fair(0, 1, 2, 3) })
	moved := f.moves() - before
	counts, _ = f.shares(0, 1, 2, 3)
	t.Logf("a 4th joined: shares %v after %v, %d moves", counts, took, moved)
	if moved < 25 || moved > 30 {
		t.Errorf("a join moved %d items; want about N/(M+1) = 25 (25–30)", moved)
	}
	f.steady(rebalance, 0, 1, 2, 3)

	// member-1 is cut off from the store: its leases end at their local
	// deadlines, the store frees them at their TTL, and the others take its
	// items over.
	before = f.moves()
	f.nodes[1].fault.Partition(true)
	took = poll.Until(t, "3 survivors sharing 100 items", patience, func() bool { return f.fair(0, 2, 3) })
	moved = f.moves() - before
	t.Logf("member-1 cut off: the survivors own everything %v later (TTL %v, renew %v, rebalance %v), %d moves", took, ttl, ttl/3, rebalance, moved)
	if limit := ttl + ttl/3 + rebalance + time.Second; took > limit { // a second for a loaded machine
		t.Errorf("takeover took %v, more than TTL + one renew period + one rebalance period (+1s): %v", took, limit)
	}
	if moved < 25 || moved > 30 {
		t.Errorf("a death moved %d items; want the dead member's 25 (25–30)", moved)
	}
	if owned := f.nodes[1].mem.Owned(); len(owned) != 0 {
		t.Errorf("the cut-off member still owns %v", owned)
	}

	// Back on the store, it joins again (its membership lease was lost) and
	// takes its share back.
	f.nodes[1].fault.Partition(false)
	took = poll.Until(t, "4 members sharing 100 items again", patience, func() bool { return f.fair(0, 1, 2, 3) })
	t.Logf("member-1 back: 25 each again after %v", took)
	if err := f.nodes[1].mem.Err(); err != nil {
		t.Errorf("the cut-off member stopped: %v", err)
	}
}

func TestFleetOnMemory(t *testing.T) {
	testFleet(t, memory.New(), "ingest", time.Second, 100*time.Millisecond)
}

func TestFleetOnRedis(t *testing.T) {
	testFleet(t, localstore.Redis(t), uniqueGroup("fleet"), 2*time.Second, 200*time.Millisecond)
}

func TestFleetOnPostgres(t *testing.T) {
	testFleet(t, localstore.Postgres(t, "partition_test"), uniqueGroup("fleet"), 2*time.Second, 200*time.Millisecond)
}
