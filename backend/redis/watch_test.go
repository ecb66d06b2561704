package redis

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// watcher is a WatchReleases running in the background: the keys it reports,
// its confirmed subscriptions, and stop, which ends it and returns its result.
type watcher struct {
	keys       chan string
	subscribed chan struct{}
	stop       func() error
}

func startWatch(t *testing.T, b *Backend) *watcher {
	t.Helper()
	w := &watcher{keys: make(chan string, 64), subscribed: make(chan struct{}, 64)}
	b.cfg.onSubscribed = func() { w.subscribed <- struct{}{} }
	if b.cfg.watchIdle > time.Second {
		b.cfg.watchIdle = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.WatchReleases(ctx, func(k string) { w.keys <- k }) }()
	var (
		once   sync.Once
		result error
	)
	w.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(5 * time.Second):
				t.Error("WatchReleases did not return after its context ended")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = w.stop() })
	return w
}

func (w *watcher) awaitSubscribed(t *testing.T) {
	t.Helper()
	select {
	case <-w.subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("release watch never subscribed")
	}
}

func (w *watcher) awaitKey(t *testing.T, want string) {
	t.Helper()
	select {
	case k := <-w.keys:
		if k != want {
			t.Fatalf("release of %q reported, want %q", k, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("release of %q not reported", want)
	}
}

// awaitDelivery releases k through release until the watch reports it, and
// drops whatever else it reports meanwhile. After a fault the watch misses
// what is published before it has resubscribed, and on a loaded machine an
// idle check may time out and make it resubscribe once more: one release is
// not enough to tell "resubscribed" from "lost for good".
func (w *watcher) awaitDelivery(t *testing.T, release func(string), k string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		release(k)
		wait := time.NewTimer(time.Second)
	inner:
		for {
			select {
			case got := <-w.keys:
				if got == k {
					wait.Stop()
					return
				}
			case <-wait.C:
				break inner
			}
		}
	}
	t.Fatalf("release of %q never reported", k)
}

// waitFor makes a new attempt of owner wait for key: it is refused, and marks
// the holding so that its release is announced.
func waitFor(t *testing.T, b *Backend, key, owner string) {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: newAttempt(), TTL: time.Second, Wait: true})
	if err != nil || g.Acquired {
		t.Fatalf("Acquire(%q, %q) with Wait = %+v, %v; want refused", key, owner, g, err)
	}
}

// releaseWaited grants key to alice through b, makes bob wait for it, and
// releases it: a release that is announced.
func releaseWaited(t *testing.T, b *Backend, key string) {
	t.Helper()
	g := mustAcquire(t, b, key, "alice", time.Minute)
	waitFor(t, b, key, "bob")
	if err := b.Release(ctxT(t), g.release()); err != nil {
		t.Fatal(err)
	}
}

func (w *watcher) expectNone(t *testing.T) {
	t.Helper()
	select {
	case k := <-w.keys:
		t.Fatalf("unexpected release notice for %q", k)
	default:
	}
}

func TestWatchReportsReleasesFromOtherBackends(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	other, err := New(redistest.Client(t), WithKeyPrefix(b.cfg.prefix)) // another process, same prefix
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, other)
	stranger := newTestBackend(t, c) // another prefix: another namespace
	w := startWatch(t, b)
	w.awaitSubscribed(t)
	ctx := ctxT(t)

	for _, k := range []string{"job", "with space\nand {braces} *glob*", awkwardKeys[len(awkwardKeys)-1]} {
		releaseWaited(t, other, k)
		w.awaitKey(t, k)
	}

	// A release that released nothing, and a release in another namespace,
	// announce nothing. The marker release afterwards proves the quiet one
	// would have been seen by now (messages on one connection keep order).
	if err := other.Release(ctx, backend.ReleaseRequest{Key: "job", Owner: "alice", Attempt: newAttempt()}); err != nil {
		t.Fatal(err)
	}
	releaseWaited(t, stranger, "job")
	releaseWaited(t, other, "marker")
	w.awaitKey(t, "marker")
	w.expectNone(t)

	if err := w.stop(); err != nil {
		t.Fatalf("WatchReleases returned %v after its context ended", err)
	}
}

func TestWatchEndsWhenBackendCloses(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subscribed := make(chan struct{}, 1)
	b.cfg.onSubscribed = func() { subscribed <- struct{}{} }
	done := make(chan error, 1)
	go func() { done <- b.WatchReleases(ctx, func(string) {}) }()
	<-subscribed
	_ = b.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WatchReleases after Close returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchReleases did not end on Close")
	}
}

func TestNotificationsOff(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c, WithReleaseNotifications(false))
	err := b.WatchReleases(ctxT(t), func(string) {})
	if !errors.Is(err, ErrNotificationsDisabled) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("WatchReleases with notifications off: %v", err)
	}
	// Release publishes nothing: a watcher of the same prefix stays quiet.
	listener, err := New(c, WithKeyPrefix(b.cfg.prefix))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, listener)
	w := startWatch(t, listener)
	w.awaitSubscribed(t)
	// Somebody waits, yet nothing is announced.
	releaseWaited(t, b, "k")
	// Marker through the listener, which does publish.
	releaseWaited(t, listener, "marker")
	w.awaitKey(t, "marker")
	w.expectNone(t)
}

// The watch survives cut connections, a connection that stays open but
// carries nothing (noticed by its PING), and a server restart.
func TestWatchResubscribesAfterFaults(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	direct := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, redistest.NewClient(t, p.Addr()), withWatchHooks(300*time.Millisecond, nil))
	publisher, err := New(direct, WithKeyPrefix(b.cfg.prefix))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, publisher)
	w := startWatch(t, b)
	w.awaitSubscribed(t)

	release := func(k string) {
		t.Helper()
		releaseWaited(t, publisher, k)
	}
	w.awaitDelivery(t, release, "before")

	p.CutAll()
	w.awaitDelivery(t, release, "after cut")

	// The connection stays open but nothing comes through any more: only
	// the idle PING can tell. New connections work.
	p.StallExisting()
	w.awaitDelivery(t, release, "after stall")

	restart(t, s, direct) // also drops the publisher's dead pooled connection
	w.awaitDelivery(t, release, "after restart")
}

// On Cluster, when the master the watch subscribed on dies, the watch moves
// to the replica that took its slots over within seconds of the failover,
// because it makes the client reload its slot map after each failure. It
// used to redial the dead node until go-redis's own reload (a minute), and
// every release announced meanwhile was lost. Nothing else goes through the
// client until the watch is back, so no other call's reload can help it.
func TestClusterWatchFollowsFailover(t *testing.T) {
	c := startTestCluster(t)
	cc := newClusterClient(t, c)
	b := newTestBackend(t, cc)
	w := startWatch(t, b)
	w.awaitSubscribed(t)

	ctx := ctxT(t)
	victim := c.Node(masterAddr(ctx, t, cc, b.Channel()))
	if victim == nil {
		t.Fatal("the watch's master is not a node of the cluster")
	}
	victim.Kill()
	c.WaitServed(ctx)
	// Well within the minute of go-redis's reload: the failover is over,
	// and the watch retries at least every watchRetryMax.
	const within = 15 * time.Second
	select {
	case <-w.subscribed:
	case <-time.After(within):
		t.Fatalf("the watch did not resubscribe within %v of the failover", within)
	}
	if got := masterAddr(ctx, t, cc, b.Channel()); got == victim.Addr() {
		t.Fatalf("the client still sends the channel to the dead master %s", got)
	}
	w.awaitDelivery(t, func(k string) { releaseWaited(t, b, k) }, "after failover")
}
