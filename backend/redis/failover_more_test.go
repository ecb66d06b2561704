package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// A batch of renewals across every master of a cluster: each renewal is one
// script on one key (one slot), so the batch is split per node; a master that
// is down leaves only its own renewals unconfirmed.
func TestClusterRenewBatchAcrossMasters(t *testing.T) {
	for _, confirm := range []bool{false, true} {
		t.Run(map[bool]string{false: "async", true: "confirmed"}[confirm], func(t *testing.T) {
			c := startTestCluster(t)
			cc := newClusterClient(t, c)
			ctx := ctxT(t)
			var opts []Option
			if confirm {
				opts = append(opts, WithReplicaConfirmation(1, confirmTimeout))
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
		})
	}
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
