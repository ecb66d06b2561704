package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// newManager starts a Manager on b, closed when the test ends.
func newManager(t *testing.T, b backend.Backend, owner string, opts ...leasehold.Option) *leasehold.Manager {
	t.Helper()
	m, err := leasehold.New(b, append([]leasehold.Option{leasehold.WithOwner(owner)}, opts...)...)
	if err != nil {
		t.Fatalf("leasehold.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}

// The server dies with a lease held: once a TTL has passed since the server
// died (so since the holder's last confirmed renewal was sent), the holder's
// handle reports the loss, and the LostEvent follows.
func TestManagerHolderLostWithinTTLWhenServerDies(t *testing.T) {
	s := redistest.Start(t)
	b := newTestBackend(t, redistest.NewClient(t, s.Addr()))
	m := newManager(t, b, "alice")
	sub := m.Subscribe(4)
	defer sub.Close()

	const ttl = 600 * time.Millisecond
	l, err := m.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	s.Kill()
	// Time itself is what is tested: the handle checks its local deadline
	// when asked, so this holds however late the engine's timers run.
	time.Sleep(ttl)
	if err := l.Err(); !errors.Is(err, leasehold.ErrLost) {
		t.Fatalf("a TTL after the server died, Err() = %v, want ErrLost", err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("Lost() not closed once Err reports the loss")
	}
	select {
	case e := <-sub.Events():
		if e.Name != "job" || e.Token != l.Token() {
			t.Fatalf("LostEvent %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no LostEvent")
	}
}

// A crash that loses the data, with WithRestartGrace set to the TTL: nobody
// is granted the name while the previous holder still believes it holds it,
// and the new token outbids the old.
func TestManagerNoDoubleHoldAcrossRestart(t *testing.T) {
	testManagerNoDoubleHoldAcrossRestart(t, false)
}

// The same after a restart from an older snapshot, where the fence counter
// survives (behind) and only the lease is lost.
func TestManagerNoDoubleHoldAcrossRestartFromOldSnapshot(t *testing.T) {
	testManagerNoDoubleHoldAcrossRestart(t, true)
}

func testManagerNoDoubleHoldAcrossRestart(t *testing.T, snapshot bool) {
	s := redistest.Start(t)
	const ttl = time.Second
	ca, cb := redistest.NewClient(t, s.Addr()), redistest.NewClient(t, s.Addr())
	ba := newTestBackend(t, ca, WithRestartGrace(ttl))
	bb, err := New(cb, WithKeyPrefix(ba.cfg.prefix), WithRestartGrace(ttl))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, bb)
	waitGraceOver(t, s, ttl)
	alice, bob := newManager(t, ba, "alice"), newManager(t, bb, "bob")

	if snapshot {
		// A holding before the snapshot leaves a counter in it.
		l, err := alice.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if err := ca.Save(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	la, err := alice.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	restart(t, s, ca, cb)

	lb, err := bob.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl), leasehold.WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("bob: %v", err)
	}
	// The handle checks its local deadline when asked: this does not depend
	// on when alice's engine gets to run.
	if err := la.Err(); !errors.Is(err, leasehold.ErrLost) {
		t.Fatalf("bob was granted the name while alice still holds it (alice: %v)", err)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("bob's token %d <= alice's %d", lb.Token(), la.Token())
	}
}

// A holder whose link goes dead (nothing answers, nothing is refused) loses
// the lease by its local deadline, before the server lets another owner in.
func TestManagerDeadLinkLosesBeforeAnotherIsGranted(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	ba := newTestBackend(t, redistest.NewClient(t, p.Addr()))
	bb, err := New(redistest.NewClient(t, s.Addr()), WithKeyPrefix(ba.cfg.prefix))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, bb)
	alice, bob := newManager(t, ba, "alice"), newManager(t, bb, "bob")
	const ttl = 500 * time.Millisecond
	la, err := alice.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	defer func() {
		// Connections that lost bytes in the hole are out of step: cut them,
		// so that Close's releases go through fresh ones.
		p.Blackhole(false)
		p.CutAll()
	}()
	lb, err := bob.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl), leasehold.WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("bob: %v", err)
	}
	// Lost() checks alice's local deadline itself: deterministic under load.
	select {
	case <-la.Lost():
	default:
		t.Fatal("bob was granted the name while alice still held it")
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("bob's token %d <= alice's %d", lb.Token(), la.Token())
	}
}
