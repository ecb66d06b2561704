package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// newManager starts a Manager on b, closed when the test ends.
func newManager(t *testing.T, b *Backend, owner string) *leasehold.Manager {
	t.Helper()
	m, err := leasehold.New(b, leasehold.WithOwner(owner))
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

// lostWithin waits for l to be lost and returns when that was observed.
func lostWithin(t *testing.T, l *leasehold.Lease, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(d):
		t.Fatalf("lease %q not lost within %v", l.Name(), d)
	}
	if !errors.Is(l.Err(), leasehold.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", l.Err())
	}
	return time.Now()
}

// The server dies with a lease held: the holder is told it lost the lease no
// later than its TTL after the server died (its last confirmed renewal was
// sent before that).
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
	killed := time.Now()
	// Generous slack for timers on a loaded machine, but well under a TTL.
	lostAt := lostWithin(t, l, ttl+300*time.Millisecond)
	if el := lostAt.Sub(killed); el > ttl+300*time.Millisecond {
		t.Fatalf("lost %v after the server died, TTL %v", el, ttl)
	}
	select {
	case e := <-sub.Events():
		if e.Name != "job" || e.Token != l.Token() {
			t.Fatalf("LostEvent %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no LostEvent")
	}
}

// A crash that loses the data, with WithRestartGrace set to the TTL: nobody
// is granted the name while the previous holder still believes it holds it,
// and the new token outbids the old.
func TestManagerNoDoubleHoldAcrossRestart(t *testing.T) {
	s := redistest.Start(t)
	const ttl = time.Second
	ca, cb := redistest.NewClient(t, s.Addr()), redistest.NewClient(t, s.Addr())
	ba := newTestBackend(t, ca, WithRestartGrace(ttl))
	bb, err := New(cb, WithKeyPrefix(ba.cfg.prefix), WithRestartGrace(ttl))
	if err != nil {
		t.Fatal(err)
	}
	waitUptime(t, s, ttl)
	alice, bob := newManager(t, ba, "alice"), newManager(t, bb, "bob")

	la, err := alice.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	s.Restart()

	type result struct {
		l   *leasehold.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := bob.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl), leasehold.WithWait(10*time.Second))
		got <- result{l, err, time.Now()}
	}()
	lostAt := lostWithin(t, la, ttl+time.Second)
	r := <-got
	if r.err != nil {
		t.Fatalf("bob: %v", r.err)
	}
	if r.at.Before(lostAt) {
		t.Fatalf("bob was granted the name %v before alice knew she had lost it", lostAt.Sub(r.at))
	}
	if r.l.Token() <= la.Token() {
		t.Fatalf("bob's token %d <= alice's %d", r.l.Token(), la.Token())
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
	lb, err := bob.Acquire(ctxT(t), "job", leasehold.WithTTL(ttl), leasehold.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("bob: %v", err)
	}
	grantedAt := time.Now()
	select {
	case <-la.Lost():
	default:
		t.Fatalf("bob was granted the name at %v while alice still held it", grantedAt)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("bob's token %d <= alice's %d", lb.Token(), la.Token())
	}
}
