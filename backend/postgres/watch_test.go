package postgres

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/faultproxy"
)

// watching starts WatchReleases on b and returns the keys it reports, a
// channel signalled at each successful LISTEN, and a stop function that
// cancels the watch and waits for it to return.
func watching(t *testing.T, b *Backend) (keys <-chan string, listening <-chan struct{}, stop func()) {
	t.Helper()
	k := make(chan string, 100)
	l := make(chan struct{}, 10)
	b.onListen = func() {
		select {
		case l <- struct{}{}:
		default: // nobody counts that many reconnects
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.WatchReleases(ctx, func(key string) { k <- key }) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("WatchReleases returned %v after cancel, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("WatchReleases did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return k, l, stop
}

// markWaited makes a waiting attempt that the live holding of key refuses,
// which marks it: only the release of a marked holding is announced.
func markWaited(t testing.TB, b *Backend, key string) {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: "waiter", Attempt: newAttempt(), TTL: live, Wait: true})
	if err != nil || g.Acquired {
		t.Fatalf("waiting Acquire(%q) = %+v, %v; want a refusal", key, g, err)
	}
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestWatchReleasesDeliversEveryRelease(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	other := newEnv(t).backend(t) // another table: its releases must not be heard
	ctx := ctxT(t)
	keys, listening, _ := watching(t, b)
	await(t, listening, "LISTEN")

	weird := "x'; DROP TABLE lease.leases; --\n*"
	for _, k := range []string{"plain", weird} {
		g := mustAcquire(t, b, k, "a", live)
		og := mustAcquire(t, other, k, "a", live)
		// Releases that delete nothing announce nothing.
		for _, r := range []backend.ReleaseRequest{
			{Key: k, Owner: "intruder", Attempt: g.attempt},
			{Key: k, Owner: "a", Attempt: newAttempt()},
		} {
			if err := b.Release(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		markWaited(t, other, k)
		if err := other.Release(ctx, og.releaseReq()); err != nil {
			t.Fatal(err)
		}
		markWaited(t, b, k)
		if err := b.Release(ctx, g.releaseReq()); err != nil {
			t.Fatal(err)
		}
		if got := await(t, keys, "release of "+k); got != k {
			t.Fatalf("watch reported %q, want %q", got, k)
		}
	}
	// Expiry announces nothing; only the release below is heard.
	short := mustAcquire(t, b, "short", "a", 20*time.Millisecond)
	waitPast(t, e.admin, short.ExpiresAt)
	s2 := mustAcquire(t, b, "short", "b", live)
	markWaited(t, b, "short")
	if err := b.Release(ctx, s2.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if got := await(t, keys, "release of short"); got != "short" {
		t.Fatalf("watch reported %q, want short", got)
	}
	select {
	case k := <-keys:
		t.Fatalf("unexpected report %q", k)
	default:
	}
}

// The LISTEN connection is terminated on the server: the watch reconnects by
// itself and hears later releases.
func TestWatchReconnectsAfterTerminate(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	keys, listening, _ := watching(t, b)
	await(t, listening, "first LISTEN")
	for round := range 3 {
		if n := e.terminate(t); n == 0 {
			t.Fatalf("round %d: no connection terminated", round)
		}
		await(t, listening, "LISTEN after terminate")
		g := mustAcquire(t, b, "k", "a", live)
		markWaited(t, b, "k")
		if err := b.Release(ctx, g.releaseReq()); err != nil {
			t.Fatal(err)
		}
		if got := await(t, keys, "release after reconnect"); got != "k" {
			t.Fatalf("watch reported %q, want k", got)
		}
	}
}

// A watch on an unreachable server keeps trying and still returns promptly,
// leaving no goroutine behind (TestMain checks), when its context ends.
func TestWatchUnreachableReturnsOnCancel(t *testing.T) {
	b, err := New(poolStub(t), WithRetry(3, time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, listening, stop := watching(t, b)
	select {
	case <-listening:
		t.Fatal("LISTEN succeeded on an unreachable server")
	case <-time.After(200 * time.Millisecond): // several reconnect attempts
	}
	stop()
}

// proxiedPool is a pool of the env's application name whose connections go
// through a fault proxy to the test server, adjusted by adjust.
func proxiedPool(t *testing.T, e *testEnv, adjust ...func(*pgxpool.Config)) (*pgxpool.Pool, *faultproxy.Proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	host, port, _ := net.SplitHostPort(p.Addr())
	pool := newPool(t, e.appName, append([]func(*pgxpool.Config){func(c *pgxpool.Config) {
		c.ConnConfig.Host = host
		c.ConnConfig.Port = uint16(mustAtoi(t, port))
	}}, adjust...)...)
	return pool, p
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A LISTEN connection whose link dies silently (nothing is refused, nothing
// arrives, new connections still work: a NAT or load balancer that forgot
// it) is noticed by the idle ping within twice the idle interval: both
// watches reconnect, say so (ready again), and their notices arrive again.
// Before, WaitForNotification blocked for ever on the dead link.
func TestWatchNoticesASilentlyDeadLink(t *testing.T) {
	e := newEnv(t)
	pool, proxy := proxiedPool(t, e)
	b, err := New(pool, WithTable(e.schema, e.table))
	if err != nil {
		t.Fatal(err)
	}
	const idle = 200 * time.Millisecond
	b.watchIdle = idle
	direct := e.backend(t) // the other processes: not through the proxy
	addr := newAttempt()
	notices, ready, _ := handOffs(t, b, addr)
	releases, listening, _ := watching(t, b)
	await(t, ready, "the hand-off watch")
	await(t, listening, "the release watch")

	handOff := func(what string) {
		t.Helper()
		key := randomName("k")
		a := mustAcquire(t, direct, key, "a", live)
		w := mustQueue(t, direct, key, "w", queueReq(addr, 1))
		if err := direct.Release(ctxT(t), a.releaseReq()); err != nil {
			t.Fatal(err)
		}
		if h := await(t, notices, "the hand-off "+what); h.Key != key || h.Attempt != w.attempt {
			t.Fatalf("notice %+v %s, want the hand-off of %q to %s", h, what, key, w.attempt)
		}
		m := mustAcquire(t, direct, key+"m", "a", live)
		markWaited(t, direct, key+"m")
		if err := direct.Release(ctxT(t), m.releaseReq()); err != nil {
			t.Fatal(err)
		}
		if got := await(t, releases, "the release "+what); got != key+"m" {
			t.Fatalf("release watch reported %q %s, want %q", got, what, key+"m")
		}
	}

	// Quiet is not a fault: both connections answer their idle pings and
	// stay (the server shows the ping as their last statement; so may one
	// of the pool's own connections, which pgxpool pings before handing out
	// one idle for a second: hence at least two; that neither watch
	// reconnected is checked below).
	err = pollServer(ctxT(t), "both LISTEN connections to have been pinged", func() (bool, error) {
		var n int
		err := e.admin.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query = '-- ping'", e.appName).Scan(&n)
		return n >= 2, err
	})
	if err != nil {
		t.Fatal(err)
	}
	handOff("after idle pings")
	select {
	case <-ready:
		t.Fatal("the hand-off watch reconnected on a healthy link")
	case <-listening:
		t.Fatal("the release watch reconnected on a healthy link")
	default:
	}

	proxy.StallExisting()
	stalled := time.Now()
	await(t, ready, "the hand-off watch after the stall")
	await(t, listening, "the release watch after the stall")
	// The bound: a quiet interval, a ping's, a reconnect (generous for a
	// loaded machine).
	if took := time.Since(stalled); took > 2*idle+5*time.Second {
		t.Errorf("the watches took %v to notice the dead link, want about %v", took, 2*idle)
	}
	handOff("after the stall")
}
