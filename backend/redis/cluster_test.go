package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// startOneNodeCluster starts a Redis Cluster of one master that owns every
// slot: enough to run the backend through a ClusterClient (hash tags are
// checked, CROSSSLOT refused, ForEachMaster walks the masters).
func startOneNodeCluster(t *testing.T) (*redistest.Server, *goredis.ClusterClient) {
	t.Helper()
	s := redistest.Start(t, "--cluster-enabled", "yes")
	admin := redistest.NewClient(t, s.Addr())
	ctx := ctxT(t)
	if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	// The node reports the state it computes on its own cron: no signal but
	// CLUSTER INFO, so poll it.
	for !strings.Contains(admin.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if ctx.Err() != nil {
			t.Fatal("the one-node cluster never reached cluster_state:ok")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 []string{s.Addr()},
		ContextTimeoutEnabled: true,
		MaxRedirects:          1,
	})
	t.Cleanup(func() { _ = cc.Close() })
	return s, cc
}

// New checks the policy of every Cluster master, and the scripts run there.
func TestClusterEvictionCheckAndScripts(t *testing.T) {
	s, cc := startOneNodeCluster(t)
	ctx := ctxT(t)
	b := newTestBackend(t, cc)
	g := mustAcquire(t, b, "a {tagged} name", "alice", time.Minute)
	if _, err := b.Renew(ctx, g.renew(time.Minute)); err != nil {
		t.Fatalf("renew on Cluster: %v", err)
	}
	res, err := b.RenewBatch(ctx, []backend.RenewRequest{g.renew(time.Minute)})
	if err != nil || res[0].Err != nil {
		t.Fatalf("batch renew on Cluster: %v, %v", res, err)
	}
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatalf("release on Cluster: %v", err)
	}

	if err := redistest.NewClient(t, s.Addr()).ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = New(cc)
	// The master is named as the cluster announces it (a lone node knows no
	// IP of its own: ":port").
	port := ":" + itoa(s.Port())
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), `"volatile-lru"`) || !strings.Contains(err.Error(), port) {
		t.Fatalf("New on a Cluster whose master may evict: %v", err)
	}
}

// The conformance suite through a ClusterClient on a cluster of three
// masters, each with a replica: the suite's names hash to slots on every
// master (checked: each master ran the backend's scripts), hash tags keep
// each name's keys on one slot, batches are split per master, and pub/sub
// goes through whichever node the client picks (hand-offs on every master
// reach one subscription).
func TestConformanceOnCluster(t *testing.T) {
	t.Parallel()
	c := startTestCluster(t)
	cc := newClusterClient(t, c)
	before := scriptCalls(ctxT(t), t, c)
	newBackend := func(t *testing.T) backend.Backend {
		return newTestBackend(t, cc)
	}
	backendtest.Run(t, newBackend)
	leaseholdtest.Run(t, newBackend)
	t.Run("HandOffsOnEveryMaster", func(t *testing.T) { handOffsOnEveryMaster(t, c, cc) })
	after := scriptCalls(ctxT(t), t, c)
	for addr, n := range after {
		if n <= before[addr] {
			t.Errorf("master %s ran no script: the names did not reach every master", addr)
		}
	}
}

// scriptCalls counts, per master, the scripts it ran (EVALSHA and EVAL).
func scriptCalls(ctx context.Context, t *testing.T, c *redistest.Cluster) map[string]int {
	t.Helper()
	calls := map[string]int{}
	for _, m := range c.Masters(ctx) {
		stats, err := c.Admin(m).Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatalf("INFO commandstats on %s: %v", m.Addr(), err)
		}
		for _, line := range strings.Split(stats, "\n") {
			for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
					n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
					calls[m.Addr()] += n
				}
			}
		}
	}
	return calls
}
