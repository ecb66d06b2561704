package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the sentinels of StartSentinel monitor.
const SentinelMaster = "leasehold"

// Sentinel is a primary, one replica of it and three sentinels watching them
// (quorum 2), all redis-server processes owned by one test on free loopback
// ports, killed in t.Cleanup whether the test passed or not.
type Sentinel struct {
	t         testing.TB
	servers   []*Server // the primary and the replica as started
	sentinels []*Server
	admin     map[*Server]*goredis.Client
}

// StartSentinel starts the group with the given down-after-milliseconds (how
// long the primary may be unreachable before the sentinels agree it is down)
// and waits until the replica is in sync (WAIT) and every sentinel names the
// primary, knows the replica and the two other sentinels.
func StartSentinel(t testing.TB, downAfter time.Duration) *Sentinel {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server is not installed: %v", err)
	}
	g := &Sentinel{t: t, admin: map[*Server]*goredis.Client{}}
	primary := Start(t, "--repl-diskless-sync-delay", "0")
	replica := Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()), "--repl-diskless-sync-delay", "0")
	g.servers = []*Server{primary, replica}
	for range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		// A sentinel rewrites its config file, so each has its own.
		text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
			"sentinel down-after-milliseconds %[1]s %[3]d\n"+
			"sentinel failover-timeout %[1]s 10000\n"+
			"sentinel parallel-syncs %[1]s 1\n",
			SentinelMaster, primary.Port(), downAfter.Milliseconds())
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatalf("write %s: %v", conf, err)
		}
		g.sentinels = append(g.sentinels, startServer(t, bin, dir, conf, "Sentinel ID is", []string{"--sentinel"}))
	}

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	g.WaitReplicated(ctx)
	g.waitSettled(ctx, primary.Addr())
	return g
}

// Addrs returns the sentinels' addresses, for goredis.FailoverOptions.
func (g *Sentinel) Addrs() []string {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Servers returns the primary and the replica as they were started.
func (g *Sentinel) Servers() []*Server { return g.servers }

// Sentinels returns the three sentinel processes.
func (g *Sentinel) Sentinels() []*Server { return g.sentinels }

// Admin returns a client of one process (created once, closed in t.Cleanup).
func (g *Sentinel) Admin(s *Server) *goredis.Client {
	if c, ok := g.admin[s]; ok {
		return c
	}
	c := NewClient(g.t, s.Addr())
	g.admin[s] = c
	return c
}

// Primary returns the server every sentinel names as the primary now.
func (g *Sentinel) Primary(ctx context.Context) *Server {
	g.t.Helper()
	addr, err := g.masterAddr(ctx, g.sentinels[0])
	if err != nil {
		g.t.Fatalf("SENTINEL get-master-addr-by-name: %v", err)
	}
	for _, s := range g.servers {
		if s.Addr() == addr {
			return s
		}
	}
	g.t.Fatalf("the sentinels name %s, which this group did not start", addr)
	return nil
}

// Failover runs SENTINEL FAILOVER (no agreement needed from the other
// sentinels) and waits until every sentinel names the former replica, that
// server's ROLE is master, and the former primary replicates from it.
func (g *Sentinel) Failover(ctx context.Context) (from, to *Server) {
	g.t.Helper()
	from = g.Primary(ctx)
	for _, s := range g.servers {
		if s != from {
			to = s
		}
	}
	if err := g.Admin(g.sentinels[0]).Do(ctx, "SENTINEL", "FAILOVER", SentinelMaster).Err(); err != nil {
		g.t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	g.waitSettled(ctx, to.Addr())
	waitFor(g.t, ctx, "the new primary's ROLE to be master", func() (bool, string) {
		role, err := g.Admin(to).Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master", fmt.Sprintf("ROLE %v %v", role, err)
	})
	return from, to
}

// WaitReplicated waits until the current primary's replica acknowledges its
// writes (WAIT 1): after a failover, until the sentinels have turned the
// former primary into a replica and it has synced.
func (g *Sentinel) WaitReplicated(ctx context.Context) {
	g.t.Helper()
	var primary *Server
	for _, s := range g.servers {
		role, err := g.Admin(s).Do(ctx, "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			primary = s
		}
	}
	if primary == nil {
		g.t.Fatal("no server of the sentinel group says it is the primary")
	}
	waitFor(g.t, ctx, "the replica of "+primary.Addr()+" in sync", func() (bool, string) {
		n, err := g.Admin(primary).Do(ctx, "WAIT", 1, 500).Int64()
		return err == nil && n >= 1, fmt.Sprintf("WAIT: %d, %v", n, err)
	})
}

// waitSettled waits until every sentinel names primary as the master and
// knows one replica and the two other sentinels.
func (g *Sentinel) waitSettled(ctx context.Context, primary string) {
	g.t.Helper()
	waitFor(g.t, ctx, "every sentinel to name "+primary, func() (bool, string) {
		for _, s := range g.sentinels {
			addr, err := g.masterAddr(ctx, s)
			if err != nil || addr != primary {
				return false, fmt.Sprintf("%s names %q (%v)", s.Addr(), addr, err)
			}
			c := g.Admin(s)
			replicas, err := c.Do(ctx, "SENTINEL", "REPLICAS", SentinelMaster).Slice()
			if err != nil || len(replicas) < 1 {
				return false, fmt.Sprintf("%s knows replicas %v (%v)", s.Addr(), replicas, err)
			}
			peers, err := c.Do(ctx, "SENTINEL", "SENTINELS", SentinelMaster).Slice()
			if err != nil || len(peers) < len(g.sentinels)-1 {
				return false, fmt.Sprintf("%s knows %d other sentinels (%v)", s.Addr(), len(peers), err)
			}
		}
		return true, ""
	})
}

func (g *Sentinel) masterAddr(ctx context.Context, s *Server) (string, error) {
	hp, err := g.Admin(s).Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster).StringSlice()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("reply %v", hp)
	}
	return hp[0] + ":" + hp[1], nil
}
