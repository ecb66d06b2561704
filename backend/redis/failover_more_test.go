package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// Batches across every master of a cluster (RenewBatch, and Batch with the
// three calls, after the masters forgot the scripts): each call is one script
// on one key (one slot), so the batch is split per node; a master that is
// down leaves only its own calls unanswered. One cluster per variant serves
// both batch kinds.
func TestClusterRenewBatchAcrossMasters(t *testing.T) {
	for _, confirm := range []bool{false, true} {
		t.Run(map[bool]string{false: "async", true: "confirmed"}[confirm], func(t *testing.T) {
			c := startTestCluster(t)
			cc := newClusterClient(t, c)
			ctx := ctxT(t)
			var opts []Option
			if confirm {
				// Not confirmTimeout: these leases last a minute, and under a
				// loaded machine a replica's acknowledgement took longer than
				// 500 ms (the grant was then given back and the setup failed).
				// WAIT answers as soon as the replica has it.
				opts = append(opts, WithReplicaConfirmation(1, 5*time.Second))
			}
			b := newTestBackend(t, cc, opts...)
			masters := c.Masters(ctx)
			victim := masters[0].Addr()
			var hs []holding
			onVictim := map[string]bool{}
			perMaster := map[string]int{}
			for i := 0; len(perMaster) < 3 || minCount(perMaster) < 3; i++ {
				key := "k" + itoa(i)
				addr := masterAddr(ctx, t, cc, b.LeaseKey(key))
				perMaster[addr]++
				onVictim[key] = addr == victim
				hs = append(hs, mustAcquire(t, b, key, "alice", time.Minute))
			}
			reqs := make([]backend.RenewRequest, len(hs))
			for i, h := range hs {
				reqs[i] = h.renew(time.Minute)
			}
			res, err := b.RenewBatch(ctx, reqs)
			if err != nil {
				t.Fatalf("RenewBatch across %d masters: %v", len(perMaster), err)
			}
			for i, r := range res {
				if r.Err != nil || r.Grant.Token != hs[i].Token {
					t.Fatalf("renew %q: %+v", hs[i].key, r)
				}
			}
			batchAcrossMasters(t, cc, b, hs)

			masters[0].Kill()
			start := time.Now()
			res, err = b.RenewBatch(ctx, reqs)
			t.Logf("batch with a master down took %v", time.Since(start))
			if err != nil {
				t.Fatalf("RenewBatch with one master down: %v", err)
			}
			for i, r := range res {
				switch {
				case onVictim[hs[i].key] && (r.Err == nil || isNotHeld(r.Err)):
					t.Errorf("renew %q on the dead master: %+v, want a fault", hs[i].key, r)
				case !onVictim[hs[i].key] && r.Err != nil:
					t.Errorf("renew %q on a live master: %v", hs[i].key, r.Err)
				}
			}
			calls := make([]backend.Call, len(hs))
			for i, h := range hs {
				calls[i] = renewOp(h.renew(time.Minute))
			}
			b.Batch(ctx, calls)
			for i, c := range calls {
				switch {
				case onVictim[hs[i].key] && (c.Err == nil || isNotHeld(c.Err)):
					t.Errorf("batch renew %q on the dead master: %+v, %v; want a fault", hs[i].key, c.Grant, c.Err)
				case !onVictim[hs[i].key] && c.Err != nil:
					t.Errorf("batch renew %q on a live master: %v", hs[i].key, c.Err)
				}
			}
		})
	}
}

// batchAcrossMasters runs Batch on names of every master, once their script
// caches are empty: renewals of hs, a release and a new grant on one name (in
// that order), and a grant and its release on another.
func batchAcrossMasters(t *testing.T, cc *goredis.ClusterClient, b *Backend, hs []holding) {
	t.Helper()
	ctx := ctxT(t)
	moved := mustAcquire(t, b, "moved {name}", "alice", time.Minute)
	if err := cc.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH on every master: %v", err)
	}
	var calls []backend.Call
	for _, h := range hs {
		calls = append(calls, renewOp(h.renew(time.Minute)))
	}
	pair := newAttempt()
	calls = append(calls,
		releaseOp(moved.release()),
		acquireOp("moved {name}", "bob", moved.attempt, false), // bob, with alice's attempt id: another holding
		acquireOp("paired", "carol", pair, false),
		releaseOp(backend.ReleaseRequest{Key: "paired", Owner: "carol", Attempt: pair}),
	)
	b.Batch(ctx, calls)
	for i, c := range calls {
		if c.Err != nil || (c.Op != backend.OpRelease && !c.Grant.Acquired) {
			t.Fatalf("batch call %d (%v): %+v, %v", i, c.Op, c.Grant, c.Err)
		}
	}
	if g := calls[len(hs)+1].Grant; g.Token <= moved.Token {
		t.Fatalf("bob's token %d does not outbid alice's %d", g.Token, moved.Token)
	}
	mustHolder(t, b, "moved {name}", "bob")
	mustHolder(t, b, "paired", "")
}

func minCount(m map[string]int) int {
	n := -1
	for _, v := range m {
		if n < 0 || v < n {
			n = v
		}
	}
	return n
}

// sentinelFailover runs the failover scenario on a primary, a replica and
// three sentinels, through goredis.NewFailoverClient: every name lives on
// the primary that fails over (SENTINEL FAILOVER).
func sentinelFailover(t *testing.T, confirm bool) failoverResult {
	g := redistest.StartSentinel(t, time.Second)
	client := func() *goredis.Client {
		c := goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName:            redistest.SentinelMaster,
			SentinelAddrs:         g.Addrs(),
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialTimeout:           time.Second,
			ReadTimeout:           2 * time.Second,
			WriteTimeout:          2 * time.Second,
		})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	f := failoverRun{
		alice: client(), bob: client(), primaries: g.Servers(), confirm: confirm,
		// SENTINEL FAILOVER does not stop the old primary before promoting
		// the replica: writes it took meanwhile are lost when it becomes a
		// replica. Without confirmation they are counted.
		noDoubles: confirm,
		onVictim:  func(context.Context, *Backend, string) bool { return true },
		fail: func(ctx context.Context) {
			g.Failover(ctx)
			// Until the sentinels turn the old primary into a replica of
			// the new one, nothing can be confirmed.
			g.WaitReplicated(ctx)
		},
	}
	return f.run(t)
}

// SENTINEL FAILOVER without replica confirmation: double holders, if any,
// are counted (the async-replication window).
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	sentinelFailover(t, false)
}

// SENTINEL FAILOVER with WithReplicaConfirmation(1, ...): no double holder.
func TestSentinelFailoverConfirmed(t *testing.T) {
	t.Parallel()
	sentinelFailover(t, true)
}
