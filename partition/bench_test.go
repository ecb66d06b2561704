package partition_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/partition"
)

// BenchmarkRebalance measures, for N items and M members in one process on
// the memory backend, how long the group takes to reach the fair shares
// again and how many items move: after the M-th member joins, and after a
// member dies (cut off from the store: its leases end at their TTL, as a
// killed process's do). Each iteration builds the group afresh; ns/op is
// the whole scenario, set-up included.
//
//	go test -run '^$' -bench Rebalance -benchtime 3x ./partition/
func BenchmarkRebalance(b *testing.B) {
	for _, c := range []struct{ items, members int }{{1000, 10}, {100, 3}} {
		b.Run(fmt.Sprintf("items=%d/members=%d", c.items, c.members), func(b *testing.B) {
			benchRebalance(b, c.items, c.members)
		})
	}
}

const (
	benchTTL   = time.Second
	benchEvery = 50 * time.Millisecond
)

func benchRebalance(b *testing.B, n, m int) {
	var joinTook, deathTook time.Duration
	var joinMoves, deathMoves int64
	for range b.N {
		g := newBenchGroup(b, n)
		for i := range m - 1 {
			g.join(i)
		}
		poll.Until(b, "the first members' shares", patience, g.fair)

		before := g.assigned.Load()
		start := time.Now()
		g.join(m - 1)
		poll.Until(b, "the shares after a join", patience, g.fair)
		joinTook += time.Since(start)
		joinMoves += g.assigned.Load() - before

		before = g.assigned.Load()
		start = time.Now()
		g.kill(0)
		poll.Until(b, "the shares after a death", patience, g.fair)
		deathTook += time.Since(start)
		deathMoves += g.assigned.Load() - before
		g.close()
	}
	per := float64(b.N)
	b.ReportMetric(float64(joinTook.Milliseconds())/per, "join-ms")
	b.ReportMetric(float64(joinMoves)/per, "join-moves")
	b.ReportMetric(float64(deathTook.Milliseconds())/per, "death-ms")
	b.ReportMetric(float64(deathMoves)/per, "death-moves")
	b.ReportMetric(float64(benchTTL.Milliseconds()), "ttl-ms")
}

// benchGroup is a group of members, each on a Manager of its own.
type benchGroup struct {
	tb       testing.TB
	store    backend.Backend
	items    []string
	ms       map[int]*leasehold.Manager
	faults   map[int]*backendtest.Faulty
	mems     map[int]*partition.Member // the live ones
	dead     []*partition.Member
	assigned atomic.Int64
}

func newBenchGroup(tb testing.TB, n int) *benchGroup {
	return &benchGroup{tb: tb, store: memory.New(), items: fleetItems(n), ms: map[int]*leasehold.Manager{}, faults: map[int]*backendtest.Faulty{}, mems: map[int]*partition.Member{}}
}

func (g *benchGroup) join(i int) {
	f, wrapped := backendtest.Wrap(g.store)
	m, err := leasehold.New(wrapped, leasehold.WithOwner(fmt.Sprint("member-", i)))
	if err != nil {
		g.tb.Fatal(err)
	}
	mem, err := partition.Join(context.Background(), m, "bench", g.items, partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) { g.assigned.Add(1); <-ctx.Done() },
	}, partition.WithTTL(benchTTL), partition.WithRebalanceEvery(benchEvery), partition.WithGrace(benchTTL))
	if err != nil {
		g.tb.Fatal(err)
	}
	g.ms[i], g.faults[i], g.mems[i] = m, f, mem
}

// kill cuts member i off from the store: its leases end at their local
// deadlines and the store frees them at their TTL. It is no longer counted.
func (g *benchGroup) kill(i int) {
	g.faults[i].Partition(true)
	g.dead = append(g.dead, g.mems[i])
	delete(g.mems, i)
}

// fair: the live members own every item once, each ⌊N/M⌋ or ⌈N/M⌉.
func (g *benchGroup) fair() bool {
	lo, hi := len(g.items)/len(g.mems), (len(g.items)+len(g.mems)-1)/len(g.mems)
	total := 0
	seen := map[string]bool{}
	for _, mem := range g.mems {
		owned := mem.Owned()
		if len(owned) < lo || len(owned) > hi {
			return false
		}
		total += len(owned)
		for _, it := range owned {
			seen[it] = true
		}
	}
	return total == len(g.items) && len(seen) == len(g.items)
}

func (g *benchGroup) close() {
	for _, mem := range g.mems {
		_ = mem.Leave(context.Background())
	}
	for _, mem := range g.dead {
		_ = mem.Leave(context.Background())
	}
	for _, m := range g.ms {
		_ = m.Close(context.Background())
	}
}
