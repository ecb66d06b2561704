package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// startFrozenCluster starts a cluster of three masters without replicas
// whose nodes wait a minute before they call a silent master failed: a
// frozen master stays frozen (nobody takes its slots over), and the live
// masters go on serving their own slots. It returns the cluster, a client
// configured as newClusterClient's, and a backend on it.
func startFrozenCluster(t *testing.T) (*redistest.Cluster, *Backend) {
	t.Helper()
	c := redistest.StartCluster(t, 3, 0, time.Minute)
	return c, newTestBackend(t, newClusterClient(t, c))
}

// One frozen Cluster master (SIGSTOP: its connections stay open and nothing
// answers, as after a host crash or a partition) costs only its own leases:
// the Manager's renewals of the live masters' leases go on being confirmed
// while those on the frozen master are lost at their local deadline. It
// used to lose every lease, because a renewal batch carried leases of every
// master and the engine answered each lease only when the whole batch had
// returned, at the frozen master's timeout.
func TestClusterFrozenMasterCostsOnlyItsOwnLeases(t *testing.T) {
	c, b := startFrozenCluster(t)
	ctx := ctxT(t)
	cc := b.client.(*goredis.ClusterClient)
	calls := signalCalls(b)
	m := newManager(t, calls, "alice")
	sub := m.Subscribe(256)
	defer sub.Close()

	const ttl = 3 * time.Second
	victim := c.Masters(ctx)[0].Addr()
	leases := map[string]*leasehold.Lease{}
	onVictim := map[string]bool{}
	perMaster := map[string]int{}
	for i := 0; len(perMaster) < 3 || minCount(perMaster) < 8; i++ {
		name := "job-" + itoa(i)
		addr := masterAddr(ctx, t, cc, b.LeaseKey(name))
		perMaster[addr]++
		onVictim[name] = addr == victim
		l, err := m.Acquire(ctx, name, leasehold.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire(%q): %v", name, err)
		}
		leases[name] = l
	}
	frozenAt := map[string]time.Time{}
	for name, l := range leases {
		frozenAt[name] = l.ExpiresAt()
	}
	c.Node(victim).Freeze()

	// Every lease on the frozen master is lost (by its local deadline: the
	// engine cannot confirm it), and no other.
	lost := 0
	for lost < perMaster[victim] {
		select {
		case ev := <-sub.Events():
			if !onVictim[ev.Name] {
				t.Fatalf("%q, on a live master, was lost: %v (%s)", ev.Name, ev.Err, ev.Reason)
			}
			lost++
		case <-time.After(4 * ttl):
			t.Fatalf("%d of the %d leases on the frozen master lost within %v", lost, perMaster[victim], 4*ttl)
		}
	}
	// By now every lease on a live master has outlived the expiry it had
	// when the master froze: it was renewed since. (Its ExpiresAt changes
	// only before a renewal round trip begins: callSignals.renewing.)
	deadline := time.Now().Add(4 * ttl)
	for name, l := range leases {
		if onVictim[name] {
			continue
		}
		for !l.ExpiresAt().After(frozenAt[name].Add(ttl)) {
			if err := l.Err(); err != nil {
				t.Fatalf("%q, on a live master: %v", name, err)
			}
			select {
			case <-calls.renewing:
			case <-time.After(time.Until(deadline)):
				if err := l.Err(); err != nil {
					t.Fatalf("%q, on a live master: %v", name, err)
				}
				t.Fatalf("%q, on a live master, was not renewed past %v", name, frozenAt[name].Add(ttl))
			}
		}
	}
	select {
	case ev := <-sub.Events():
		t.Fatalf("%q lost too: %v (%s)", ev.Name, ev.Err, ev.Reason)
	default:
	}
}

// Straight on the backend, with one master frozen: Shard names each name's
// master; a RenewBatch (or a Batch) of one live master's renewals, as the
// engine sends them, is answered at once; the frozen master's ends with its
// context; and one RenewBatch across every master keeps the live masters'
// results when its context ends.
func TestClusterRenewBatchWithAFrozenMaster(t *testing.T) {
	c, b := startFrozenCluster(t)
	ctx := ctxT(t)
	cc := b.client.(*goredis.ClusterClient)
	victim := c.Masters(ctx)[0].Addr()
	byShard := map[string][]holding{}
	var all []holding
	for i := 0; len(byShard) < 3 || minHeld(byShard) < 3; i++ {
		h := mustAcquire(t, b, "k"+itoa(i), "alice", time.Minute)
		shard := b.Shard(h.key)
		if want := masterAddr(ctx, t, cc, b.LeaseKey(h.key)); shard != want {
			t.Fatalf("Shard(%q) = %q, want its master %s", h.key, shard, want)
		}
		byShard[shard] = append(byShard[shard], h)
		all = append(all, h)
	}
	c.Node(victim).Freeze()

	const wait = time.Second
	for shard, hs := range byShard {
		reqs := make([]backend.RenewRequest, len(hs))
		calls := make([]backend.Call, len(hs))
		for i, h := range hs {
			reqs[i], calls[i] = h.renew(time.Minute), renewOp(h.renew(time.Minute))
		}
		bctx, cancel := context.WithTimeout(context.Background(), wait)
		start := time.Now()
		res, err := b.RenewBatch(bctx, reqs)
		el := time.Since(start)
		b.Batch(bctx, calls)
		cancel()
		if shard == victim {
			if !errors.Is(err, context.DeadlineExceeded) || el > wait+ctxSlack {
				t.Errorf("RenewBatch on the frozen master: %v after %v; want its context's deadline (%v)", err, el, wait)
			}
			continue
		}
		if err != nil || el > wait/2 {
			t.Fatalf("RenewBatch on live master %s: %v after %v; want an answer at once", shard, err, el)
		}
		for i, r := range res {
			if r.Err != nil || calls[i].Err != nil {
				t.Errorf("renew %q on live master %s: %v, in a Batch %v", hs[i].key, shard, r.Err, calls[i].Err)
			}
		}
	}

	reqs := make([]backend.RenewRequest, len(all))
	for i, h := range all {
		reqs[i] = h.renew(time.Minute)
	}
	bctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := b.RenewBatch(bctx, reqs)
	if err != nil {
		t.Fatalf("RenewBatch across the masters: %v; want the live masters' results", err)
	}
	for i, r := range res {
		if frozen := b.Shard(all[i].key) == victim; frozen == (r.Err == nil) || isNotHeld(r.Err) {
			t.Errorf("renew %q (on the frozen master: %v) across the masters: %+v", all[i].key, frozen, r)
		}
	}
}

func minHeld(m map[string][]holding) int {
	n := -1
	for _, hs := range m {
		if n < 0 || len(hs) < n {
			n = len(hs)
		}
	}
	return n
}
