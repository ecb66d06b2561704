package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// The failover tests hold failoverLeases leases of failoverTTL each on one
// Manager (alice) while another (bob) tries to take every name, then fail a
// primary over. failoverTTL is short for speed and long enough for a loaded
// machine to renew 1,000 leases a few times per TTL.
const (
	failoverLeases = 1000
	failoverTTL    = 4 * time.Second
	// clusterNodeTimeout is the test clusters' cluster-node-timeout: a master
	// unreachable for this long is marked failing and its replica takes over
	// (about 1-3 s after a kill -9 here).
	clusterNodeTimeout = time.Second
	// confirmTimeout bounds WAIT in the tests with replica confirmation:
	// below a third of the TTL, so that a slow acknowledgement delays a
	// renewal but never by a whole renewal period.
	confirmTimeout = 500 * time.Millisecond
)

// holdChecker records every grant of every name, in the order the grants
// reach it, and finds what must never happen: a grant of a name while an
// earlier holder's handle still says it holds it (Err() == nil: the handle
// checks its own local deadline, so a holder past it counts as not holding),
// and a token that does not exceed every earlier token of that name.
type holdChecker struct {
	mu      sync.Mutex
	holders map[string][]*leasehold.Lease
	doubles []string
	tokens  []string
}

func newHoldChecker() *holdChecker {
	return &holdChecker{holders: map[string][]*leasehold.Lease{}}
}

func (c *holdChecker) granted(l *leasehold.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := l.Name()
	for _, prev := range c.holders[name] {
		if prev.Err() == nil {
			c.doubles = append(c.doubles, fmt.Sprintf("%q granted to %s (token %d) while %s still holds it (token %d)",
				name, l.Owner(), l.Token(), prev.Owner(), prev.Token()))
		}
		if l.Token() <= prev.Token() {
			c.tokens = append(c.tokens, fmt.Sprintf("%q: token %d granted to %s after token %d of %s",
				name, l.Token(), l.Owner(), prev.Token(), prev.Owner()))
		}
	}
	c.holders[name] = append(c.holders[name], l)
}

// report returns the double holders and the token faults found so far.
func (c *holdChecker) report() (doubles, tokens []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.doubles...), append([]string(nil), c.tokens...)
}

// failoverRun is one failover scenario.
type failoverRun struct {
	alice, bob goredis.UniversalClient // each Manager's own client
	// primaries are the servers that hold names before the failover; the
	// restart grace must be over on them before the test begins.
	primaries []*redistest.Server
	confirm   bool
	// onVictim reports whether name lives on the primary that fails; called
	// before the failover.
	onVictim func(ctx context.Context, b *Backend, name string) bool
	// fail fails the primary over and returns once the deployment serves
	// every name again.
	fail func(ctx context.Context)
	// noDoubles: the scenario must give no double holder at all. Otherwise
	// they are counted and logged: the documented async-replication window.
	noDoubles bool
}

// failoverResult is what a scenario observed.
type failoverResult struct {
	victims, kept, lost, bobGranted int
	survivorsExpired                int // leases on surviving primaries alice's engine let expire
	doubles                         []string
}

// run holds failoverLeases leases, fails over, keeps bob trying every name
// until a TTL after the deployment serves again, and checks: no token repeats
// or goes back for any name; no name held on a surviving primary is lost or
// granted to bob; on the failed primary, no double holder when noDoubles.
func (f failoverRun) run(t *testing.T) failoverResult {
	t.Helper()
	opts := []Option{WithRestartGrace(failoverTTL)}
	if f.confirm {
		opts = append(opts, WithReplicaConfirmation(1, confirmTimeout))
	}
	ba := newTestBackend(t, f.alice, opts...)
	bb, err := New(f.bob, append([]Option{WithKeyPrefix(ba.cfg.prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, bb)
	for _, s := range f.primaries {
		waitGraceOver(t, s, failoverTTL)
	}
	alice, bob := newManager(t, ba, "alice"), newManager(t, bb, "bob")
	check := newHoldChecker()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	names := make([]string, failoverLeases)
	for i := range names {
		names[i] = fmt.Sprintf("job-%04d", i)
	}
	victim := map[string]bool{}
	for _, n := range names {
		victim[n] = f.onVictim(ctx, ba, n)
	}

	// alice takes every name, 32 at a time.
	leases := make([]*leasehold.Lease, len(names))
	var wg sync.WaitGroup
	next := atomic.Int64{}
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(names); i = int(next.Add(1)) - 1 {
				l, err := alice.Acquire(ctx, names[i], leasehold.WithTTL(failoverTTL), leasehold.WithWait(10*time.Second))
				if err != nil {
					errs <- fmt.Errorf("alice %q: %w", names[i], err)
					return
				}
				leases[i] = l
				check.granted(l)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// bob tries every name on the failed primary and every tenth elsewhere,
	// again and again, until stopped; each grant goes to the checker at once.
	// (Every name alice holds elsewhere is checked at the end: a loss there is
	// a failure whether or not bob took it.)
	var contested []int
	for i, n := range names {
		if victim[n] || i%10 == 0 {
			contested = append(contested, i)
		}
	}
	stop := make(chan struct{})
	stopBob := sync.OnceFunc(func() { close(stop) })
	defer func() { stopBob(); wg.Wait() }() // also when the test fails
	var bobGranted atomic.Int64
	bobHolds := make([]atomic.Bool, len(names))
	var passes atomic.Int64
	passed := make(chan struct{}, 1) // a pass ended (one pending is enough)
	awaitPasses := func(n int64) {
		t.Helper()
		for passes.Load() < n {
			select {
			case <-passed:
			case <-ctx.Done():
				t.Fatalf("bob made %d passes, want %d", passes.Load(), n)
			}
		}
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				for j := w; j < len(contested); j += 2 {
					i := contested[j]
					select {
					case <-stop:
						return
					default:
					}
					if bobHolds[i].Load() {
						continue
					}
					l, err := bob.Acquire(ctx, names[i], leasehold.WithTTL(failoverTTL))
					if err == nil {
						check.granted(l)
						bobHolds[i].Store(true)
						bobGranted.Add(1)
					}
				}
				passes.Add(1)
				select {
				case passed <- struct{}{}:
				default:
				}
			}
		}()
	}
	// One full pass before the failover: bob gets nothing while alice holds.
	awaitPasses(2)
	if n := bobGranted.Load(); n != 0 {
		t.Errorf("bob was granted %d names before any failover", n)
	}

	start := time.Now()
	f.fail(ctx)
	t.Logf("%s: failover served again after %v", t.Name(), time.Since(start).Round(time.Millisecond))
	// A TTL after that, every holding alice could not renew has expired on
	// the new primary; bob's next pass after that would find it. The lost
	// ones must have been reported to alice before bob got them.
	served := passes.Load()
	time.Sleep(failoverTTL) // the time itself is under test: expiries send no signal
	awaitPasses(max(passes.Load()+2, served+2))
	stopBob()
	wg.Wait()

	res := failoverResult{bobGranted: int(bobGranted.Load())}
	var unclaimed []int // names alice lost that bob has not been granted
	for i, n := range names {
		err := leases[i].Err()
		if !victim[n] {
			// The surviving primaries keep every holding: none is refused.
			// A holder starved of CPU may still miss its own deadline (the
			// engine then reports ReasonExpired, and bob may take the name
			// after it): counted, not failed, since it depends on load.
			if errors.Is(err, backend.ErrNotHeld) {
				t.Errorf("%q on a surviving primary was refused: %v", n, err)
			}
			if err != nil {
				res.survivorsExpired++
			}
			continue
		}
		res.victims++
		if err == nil {
			res.kept++
		} else {
			res.lost++
			if !errors.Is(err, leasehold.ErrLost) {
				t.Errorf("%q: alice's handle says %v, want ErrLost", n, err)
			}
			if !bobHolds[i].Load() {
				unclaimed = append(unclaimed, i)
			}
		}
	}
	// Liveness: a name alice lost is free again a TTL after her last renewal
	// at the latest, on whichever primary serves it now. bob takes those he
	// has not had yet, waiting up to two TTLs for each, concurrently.
	for _, i := range unclaimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := bob.Acquire(ctx, names[i], leasehold.WithTTL(failoverTTL), leasehold.WithWait(2*failoverTTL))
			if err != nil {
				t.Errorf("%q, lost by alice, never became free again: %v", names[i], err)
				return
			}
			check.granted(l)
		}()
	}
	wg.Wait()
	var tokens []string
	res.doubles, tokens = check.report()
	for _, e := range tokens {
		t.Error(e)
	}
	t.Logf("%s: names on the failed primary: %d, kept by alice: %d, lost: %d; granted to bob: %d; double holders: %d; leases on surviving primaries lost by alice's own deadline: %d",
		t.Name(), res.victims, res.kept, res.lost, res.bobGranted, len(res.doubles), res.survivorsExpired)
	if f.noDoubles {
		for _, d := range res.doubles {
			t.Error(d)
		}
	} else {
		for _, d := range res.doubles {
			t.Logf("async-replication window: %s", d)
		}
	}

	// A promoted replica is not a restarted server: the restart grace does
	// not hold a free name back on it.
	for i := 0; ; i++ {
		name := fmt.Sprintf("fresh-%d", i)
		if !f.onVictim(ctx, bb, name) {
			continue
		}
		if _, err := bob.Acquire(ctx, name, leasehold.WithTTL(failoverTTL)); err != nil {
			t.Errorf("a free name on the promoted primary: %v (the restart grace should not apply)", err)
		}
		break
	}
	return res
}

// startTestCluster starts the 3-master, 3-replica cluster of these tests.
func startTestCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	return redistest.StartCluster(t, 3, 1, clusterNodeTimeout)
}

// newClusterClient returns a client of c, closed in t.Cleanup, configured to
// give up on a dead master at once, as a lease holder's client should: the
// engine retries unconfirmed renewals itself, up to the local deadline, and
// bounds its concurrent backend calls (256), so a client that spends a second
// on each call to a dead master fills them with the dead master's leases and
// holds back the renewals of the live masters' leases, some past their
// deadline. go-redis v9.23 retries by default: a refused dial 5 times, 100 ms
// apart (DialerRetries, not in ClusterOptions, hence NewClient), a failed
// command 3 times per node (MaxRetries) and 3 times across nodes
// (MaxRedirects), with backoff. With those defaults the kill -9 tests lost
// 20-500 leases of the live masters; with these, none.
func newClusterClient(t *testing.T, c *redistest.Cluster) *goredis.ClusterClient {
	t.Helper()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 c.Addrs(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		MaxRedirects:          1, // one MOVED or ASK is followed
		NewClient: func(opt *goredis.Options) *goredis.Client {
			opt.DialerRetries = 1
			opt.DialerRetryTimeout = 10 * time.Millisecond
			return goredis.NewClient(opt)
		},
		DialTimeout:  time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
	})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// masterAddr is the address of the master that serves key now, as the client
// sees it.
func masterAddr(ctx context.Context, t *testing.T, cc *goredis.ClusterClient, key string) string {
	t.Helper()
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("MasterForKey(%q): %v", key, err)
	}
	return node.Options().Addr
}

// clusterFailover runs one failover scenario on a cluster of its own: kill
// says how the first master fails (kill -9, or CLUSTER FAILOVER with option
// on its replica).
func clusterFailover(t *testing.T, kill bool, option string, confirm, noDoubles bool) failoverResult {
	replicas := 1
	if kill && confirm {
		// WAIT 1 after a master's death needs a second replica: the one
		// promoted has no replica of its own until the other one follows it.
		replicas = 2
	}
	c := redistest.StartCluster(t, 3, replicas, clusterNodeTimeout)
	ca, cb := newClusterClient(t, c), newClusterClient(t, c)
	ctx := ctxT(t)
	masters := c.Masters(ctx)
	victim := masters[0]
	replica := c.ReplicaOf(ctx, victim)
	// The victim's slots, remembered: its replica takes them over.
	ranges, err := ca.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var victimSlots []goredis.ClusterSlot
	for _, r := range ranges {
		if len(r.Nodes) > 0 && r.Nodes[0].Addr == victim.Addr() {
			victimSlots = append(victimSlots, r)
		}
	}
	f := failoverRun{
		alice: ca, bob: cb, primaries: masters, confirm: confirm, noDoubles: noDoubles,
		onVictim: func(ctx context.Context, b *Backend, name string) bool {
			slot, err := ca.ClusterKeySlot(ctx, b.LeaseKey(name)).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT: %v", err)
			}
			for _, r := range victimSlots {
				if int64(r.Start) <= slot && slot <= int64(r.End) {
					return true
				}
			}
			return false
		},
		fail: func(ctx context.Context) {
			if kill {
				victim.Kill()
				c.WaitServed(ctx)
				c.WaitReplicas(ctx, c.MasterOfSlot(ctx, int(victimSlots[0].Start)), replicas-1)
				return
			}
			c.Failover(ctx, replica, option)
			// The old master follows its replica (and must sync) before
			// anything on those slots can be confirmed again.
			c.WaitReplicas(ctx, replica, 1)
		},
	}
	return f.run(t)
}

// kill -9 of a master without replica confirmation: its replica takes over
// after cluster-node-timeout; writes it had not received yet are lost (the
// async-replication window), so double holders are counted, not forbidden.
func TestClusterFailoverKill(t *testing.T) {
	t.Parallel()
	clusterFailover(t, true, "", false, false)
}

// kill -9 of a master with WithReplicaConfirmation(1, ...): every grant and
// renewal alice relies on is on the replica that takes over: no double holder.
func TestClusterFailoverKillConfirmed(t *testing.T) {
	t.Parallel()
	clusterFailover(t, true, "", true, true)
}

// CLUSTER FAILOVER (coordinated: the master stops taking writes until its
// replica has them all) loses nothing, even without confirmation.
func TestClusterFailoverCoordinated(t *testing.T) {
	t.Parallel()
	clusterFailover(t, false, "", false, true)
}

// CLUSTER FAILOVER FORCE (the replica takes over without the master's
// agreement; writes in flight may be lost) with confirmation: no double holder.
func TestClusterFailoverForcedConfirmed(t *testing.T) {
	t.Parallel()
	clusterFailover(t, false, "FORCE", true, true)
}
