package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of every Redis Cluster.
const clusterSlots = 16384

// readyTimeout bounds every wait for a cluster or a sentinel group to settle:
// generous, since the machine running the tests may be loaded.
const readyTimeout = 60 * time.Second

// Cluster is a Redis Cluster of redis-server processes owned by one test, on
// free loopback ports (client and bus), each in a temporary directory of its
// own, without persistence. Every process is killed in t.Cleanup, whether the
// test passed or not.
type Cluster struct {
	t     testing.TB
	nodes []*Server

	mu      sync.Mutex
	clients map[string]*goredis.Client // admin clients by address
}

// StartCluster starts masters*(1+replicas) nodes with the given
// cluster-node-timeout (how long a master may be unreachable before its
// replica takes over), joins them with `redis-cli --cluster create
// --cluster-replicas replicas --cluster-yes`, and waits until every node says
// cluster_state:ok, every slot is served and every master's replicas
// acknowledge its writes (WAIT). It skips the test when redis-server or
// redis-cli is missing (fails under LEASEHOLD_REQUIRE_SERVICES=1).
//
// The nodes can fail over at any time (cluster-replica-validity-factor 0: a
// replica never considers its data too old to take over), and replicas never
// migrate to other masters, so the test decides the topology.
func StartCluster(t testing.TB, masters, replicas int, nodeTimeout time.Duration) *Cluster {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server is not installed: %v", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Unavailable(t, "redis-cli is not installed (package redis-tools): %v", err)
	}
	if masters < 3 {
		t.Fatalf("StartCluster: redis-cli --cluster create needs at least 3 masters, not %d", masters)
	}
	c := &Cluster{t: t, clients: map[string]*goredis.Client{}}
	n := masters * (1 + replicas)
	addrs := make([]string, 0, n)
	for range n {
		// The bus port is chosen here, the client port by startServer: both
		// free a moment ago, and checked to differ from each other.
		bus := FreePort(t)
		s := startServer(t, bin, t.TempDir(), "", "Ready to accept connections", []string{
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
			"--cluster-replica-validity-factor", "0",
			"--cluster-allow-replica-migration", "no",
			"--repl-diskless-sync-delay", "0",
		})
		if s.Port() == bus {
			t.Fatalf("StartCluster: client and bus port collided (%d)", bus)
		}
		c.nodes = append(c.nodes, s)
		addrs = append(addrs, s.Addr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitServed(ctx)
	for _, m := range c.Masters(ctx) {
		c.WaitReplicas(ctx, m, replicas)
	}
	return c
}

// Nodes returns every node, dead ones included, in the order they started.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Addrs returns the addresses of the nodes, for goredis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Admin returns a client of one node (created once, closed in t.Cleanup).
func (c *Cluster) Admin(s *Server) *goredis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[s.Addr()]; ok {
		return cl
	}
	cl := NewClient(c.t, s.Addr())
	c.clients[s.Addr()] = cl
	return cl
}

// Node returns the node listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Masters returns the live nodes whose ROLE is master.
func (c *Cluster) Masters(ctx context.Context) []*Server {
	c.t.Helper()
	var ms []*Server
	for _, s := range c.nodes {
		if !s.Alive() {
			continue
		}
		role, err := c.Admin(s).Do(ctx, "ROLE").Slice()
		if err != nil {
			c.t.Fatalf("ROLE on %s: %v", s.Addr(), err)
		}
		if len(role) > 0 && role[0] == "master" {
			ms = append(ms, s)
		}
	}
	return ms
}

// ReplicaOf returns a live replica of master (by ROLE), waiting for one: a
// master that just lost its slots to its replica follows it a moment later.
func (c *Cluster) ReplicaOf(ctx context.Context, master *Server) *Server {
	c.t.Helper()
	var found *Server
	c.waitFor(ctx, "a replica of "+master.Addr(), func() (bool, string) {
		for _, s := range c.nodes {
			if s == master || !s.Alive() {
				continue
			}
			role, err := c.Admin(s).Do(ctx, "ROLE").Slice()
			if err != nil {
				return false, fmt.Sprintf("ROLE on %s: %v", s.Addr(), err)
			}
			if len(role) >= 3 && role[0] == "slave" && fmt.Sprint(role[2]) == strconv.Itoa(master.Port()) {
				found = s
				return true, ""
			}
		}
		return false, "no node replicates it"
	})
	return found
}

// Failover runs CLUSTER FAILOVER on replica with the given option ("" for
// the coordinated failover, "FORCE" or "TAKEOVER") and waits until replica
// is a master serving slots and every slot is served again.
func (c *Cluster) Failover(ctx context.Context, replica *Server, option string) {
	c.t.Helper()
	args := []any{"CLUSTER", "FAILOVER"}
	if option != "" {
		args = append(args, option)
	}
	if err := c.Admin(replica).Do(ctx, args...).Err(); err != nil {
		c.t.Fatalf("CLUSTER FAILOVER %s on %s: %v", option, replica.Addr(), err)
	}
	// A manual failover that does not complete within Redis's manual
	// failover timeout (5 s; a loaded machine can take that long to
	// coordinate) is aborted, and the replica stays a replica: ask again.
	const manualFailoverTimeout = 6 * time.Second
	asked := time.Now()
	c.waitFor(ctx, "CLUSTER FAILOVER "+option+" to promote "+replica.Addr(), func() (bool, string) {
		role, err := c.Admin(replica).Do(ctx, "ROLE").Slice()
		if err != nil || len(role) == 0 || role[0] != "master" {
			if time.Since(asked) > manualFailoverTimeout {
				asked = time.Now()
				_ = c.Admin(replica).Do(ctx, args...).Err()
			}
			return false, fmt.Sprintf("ROLE %v %v", role, err)
		}
		return true, ""
	})
	c.WaitServed(ctx)
}

// WaitServed waits until every live node says cluster_state:ok, and every
// slot is served by a live master according to each of them. The nodes
// compute their state on their own cron and send no signal: this polls.
func (c *Cluster) WaitServed(ctx context.Context) {
	c.t.Helper()
	c.waitFor(ctx, "every slot served by a live master", func() (bool, string) {
		for _, s := range c.nodes {
			if !s.Alive() {
				continue
			}
			info, err := c.Admin(s).ClusterInfo(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("CLUSTER INFO on %s: %v", s.Addr(), err)
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:"+strconv.Itoa(clusterSlots)) {
				return false, fmt.Sprintf("%s: %s", s.Addr(), info)
			}
			slots, err := c.Admin(s).ClusterSlots(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("CLUSTER SLOTS on %s: %v", s.Addr(), err)
			}
			served := 0
			for _, r := range slots {
				if len(r.Nodes) == 0 {
					continue
				}
				if m := c.Node(r.Nodes[0].Addr); m == nil || !m.Alive() {
					return false, fmt.Sprintf("%s: slots %d-%d served by %s, which is down", s.Addr(), r.Start, r.End, r.Nodes[0].Addr)
				}
				served += int(r.End - r.Start + 1)
			}
			if served != clusterSlots {
				return false, fmt.Sprintf("%s: %d slots served", s.Addr(), served)
			}
		}
		return true, ""
	})
}

// WaitReplicas waits until n replicas acknowledge master's writes: WAIT is
// the signal that they are in sync.
func (c *Cluster) WaitReplicas(ctx context.Context, master *Server, n int) {
	c.t.Helper()
	if n == 0 {
		return
	}
	c.waitFor(ctx, fmt.Sprintf("%d replicas of %s in sync", n, master.Addr()), func() (bool, string) {
		got, err := c.Admin(master).Do(ctx, "WAIT", n, 500).Int64()
		return err == nil && got >= int64(n), fmt.Sprintf("WAIT: %d, %v", got, err)
	})
}

// waitFor polls cond until it holds, failing the test with cond's last
// explanation when ctx ends first.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func() (bool, string)) {
	c.t.Helper()
	waitFor(c.t, ctx, what, cond)
}

func waitFor(t testing.TB, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last: %s", what, ctx.Err(), why)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// MasterOfSlot returns the live master that serves slot, as the first live
// node asked says, or fails the test.
func (c *Cluster) MasterOfSlot(ctx context.Context, slot int) *Server {
	c.t.Helper()
	for _, s := range c.nodes {
		if !s.Alive() {
			continue
		}
		slots, err := c.Admin(s).ClusterSlots(ctx).Result()
		if err != nil {
			c.t.Fatalf("CLUSTER SLOTS on %s: %v", s.Addr(), err)
		}
		for _, r := range slots {
			if int(r.Start) <= slot && slot <= int(r.End) && len(r.Nodes) > 0 {
				if m := c.Node(r.Nodes[0].Addr); m != nil && m.Alive() {
					return m
				}
			}
		}
		break
	}
	c.t.Fatalf("no live master serves slot %d", slot)
	return nil
}
