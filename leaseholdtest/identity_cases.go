package leaseholdtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// identityCases check, through Managers on the backend actor's path, the
// promises that rest on holdings being named by their attempt: tokens never
// repeat whatever failed, two Managers never share a holding, Close holds
// under any context, and a refusal names the real holder.
func (s *suite) identityCases() []testCase {
	return []testCase{
		{"CloseWithAnEndedContext", s.mCloseEndedContext},
		{"CloseCancelsAnAcquireInFlight", s.mCloseCancelsAcquire},
		{"CloseCancelsAReleaseInFlight", s.mCloseCancelsRelease},
		{"UnconfirmedReleaseNeverRepeatsAToken", s.mUnconfirmedRelease},
		{"ReleaseWithAnEndedContextStillReleases", s.mReleaseEndedContext},
		{"LossWithUnconfirmedCleanupNeverRepeatsAToken", s.mLossUnconfirmedCleanup},
		{"TwoManagersWithOneOwnerNeverBothHold", s.mSameOwnerTwoManagers},
		{"NotAcquiredNamesTheRealHolder", s.mNotAcquiredNamesHolder},
	}
}

// mCloseEndedContext: Close with a context that has already ended (as after
// SIGTERM with signal.NotifyContext), while leases are held and Acquires race
// it. Close must not crash; no Acquire may hand out a live lease after Close
// returned; every handle ends released (no LostEvent); every subscription
// closes; goleak (in the test package's TestMain) finds nothing left.
//
// It runs twice: through the counting wrapper (so that every backend's calls
// go through the backend actor) and on the backend itself (the memory
// backend's lease actors then call it directly).
func (s *suite) mCloseEndedContext(t *testing.T) {
	p := s.pair(t)
	t.Run("wrapped", func(t *testing.T) { s.closeEndedContext(t, p.b, p.prefix+"w/") })
	t.Run("direct", func(t *testing.T) { s.closeEndedContext(t, p.raw, p.prefix+"d/") })
}

func (s *suite) closeEndedContext(t *testing.T, b backend.Backend, prefix string) {
	m := s.newManager(t, b, "o1", prefix)
	sub := m.Subscribe(64)
	var ls []*leasehold.Lease
	for i := range 5 {
		ls = append(ls, mustAcquire(t, m, fmt.Sprint("l", i), leasehold.WithTTL(2*s.short)))
	}
	var (
		mu     sync.Mutex
		raced  []*leasehold.Lease
		wg     sync.WaitGroup
		before = make(chan struct{})
		// Close starts while acquires are under way: once any worker has
		// made one, or has stopped (so that a failing first acquire
		// fails the test instead of hanging it).
		startClose = sync.OnceFunc(func() { close(before) })
	)
	for i := range 4 {
		wg.Go(func() {
			defer startClose()
			for n := range 10_000 {
				if n == 1 {
					startClose()
				}
				l, err := m.Acquire(context.Background(), fmt.Sprintf("race%d-%d", i, n), leasehold.WithTTL(2*s.short))
				if err != nil {
					if !errors.Is(err, leasehold.ErrClosed) {
						t.Errorf("Acquire racing Close: %v, want ErrClosed", err)
					}
					return
				}
				mu.Lock()
				raced = append(raced, l)
				mu.Unlock()
			}
		})
	}
	<-before
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Close(ended); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Close(ended ctx) = %v, want nil or context.Canceled", err)
	}
	for _, l := range ls {
		if err := l.Err(); !errors.Is(err, leasehold.ErrReleased) {
			t.Errorf("%s after Close: %v, want ErrReleased", l.Name(), err)
		}
	}
	mu.Lock()
	for _, l := range raced {
		if l.Err() == nil {
			t.Errorf("%s: a live handle after Close returned", l.Name())
		}
	}
	mu.Unlock()
	wg.Wait()
	mu.Lock()
	for _, l := range raced {
		if err := l.Err(); !errors.Is(err, leasehold.ErrReleased) {
			t.Errorf("%s (acquired racing Close): %v, want ErrReleased", l.Name(), err)
		}
	}
	mu.Unlock()
	for ev := range sub.Events() { // closed by Close: the loop ends
		t.Errorf("LostEvent %+v after Close, want none", ev)
	}
	// What Close could not release is left to the store's TTL.
	mustAcquire(t, s.newManager(t, b, "o2", prefix), "l0", leasehold.WithWait(s.patience))
}

// mCloseCancelsAcquire: Close(context.Background()) while an acquire is in
// flight to a backend call that only returns when its context ends.
func (s *suite) mCloseCancelsAcquire(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	held := mustAcquire(t, m, "held")
	p.f.BlockAcquire.Store(true)
	acq := make(chan error, 1)
	go func() {
		_, err := m.Acquire(context.Background(), "job", leasehold.WithWait(leasehold.WaitForever))
		acq <- err
	}()
	s.eventually(t, "the acquire to reach the backend", func() bool { return p.f.Blocked.Load() == 1 })
	closeWithin(t, m, s.patience)
	select {
	case err := <-acq:
		if !errors.Is(err, leasehold.ErrClosed) {
			t.Errorf("Acquire in flight at Close = %v, want ErrClosed", err)
		}
	case <-time.After(s.patience):
		t.Fatal("the waiter was not answered")
	}
	if err := held.Err(); !errors.Is(err, leasehold.ErrReleased) {
		t.Errorf("held lease after Close: %v, want ErrReleased", err)
	}
}

// mCloseCancelsRelease: Close(context.Background()) while a caller's Release
// is in flight to a backend call that only returns when its context ends.
func (s *suite) mCloseCancelsRelease(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job")
	p.f.BlockRelease.Store(true)
	rel := make(chan error, 1)
	go func() { rel <- l.Release(context.Background()) }()
	s.eventually(t, "the release to reach the backend", func() bool { return p.f.Blocked.Load() == 1 })
	if err := l.Err(); !errors.Is(err, leasehold.ErrReleased) {
		t.Errorf("handle during its Release: %v, want ErrReleased", err)
	}
	closeWithin(t, m, s.patience)
	select {
	case <-rel: // nil or the cancelled call's error: either way it returned
	case <-time.After(s.patience):
		t.Fatal("Release did not return after Close")
	}
}

func closeWithin(t *testing.T, m *leasehold.Manager, within time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- m.Close(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("Close(context.Background()) still running after %v", within)
	}
}

// mUnconfirmedRelease: a Release the backend does not confirm, then a new
// Acquire of the name by the same Manager. The old holding may still be live
// in the store: the new Acquire must never be handed its token.
func (s *suite) mUnconfirmedRelease(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Minute))
	p.f.FailRelease.Store(true)
	if err := l.Release(ctxT(t)); err == nil {
		t.Error("Release = nil while the backend failed it")
	}
	if err := l.Err(); !errors.Is(err, leasehold.ErrReleased) {
		t.Errorf("after Release returned: Err() = %v, want ErrReleased", err)
	}
	if l2, err := m.Acquire(ctxT(t), "job"); err == nil {
		t.Fatalf("granted token %d while the old holding (token %d) may still be live", l2.Token(), l.Token())
	} else {
		wantNotAcquired(t, err)
	}
	p.f.FailRelease.Store(false)
	// The next Acquire sends the unconfirmed release first: the name is free
	// at once, not after a minute's TTL.
	l3 := mustAcquire(t, m, "job", leasehold.WithWait(s.patience))
	if l3.Token() <= l.Token() {
		t.Errorf("token %d after the unconfirmed release of %d, want higher", l3.Token(), l.Token())
	}
}

// mReleaseEndedContext: a Release whose context has already ended still
// releases (detached from the caller), so the same Manager's next Acquire
// gets a new holding with a higher token and nobody waits for the TTL.
func (s *suite) mReleaseEndedContext(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	l := mustAcquire(t, m1, "job", leasehold.WithTTL(time.Minute))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Release(ended); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Release(ended ctx) = %v, want nil or context.Canceled", err)
	}
	if err := l.Err(); !errors.Is(err, leasehold.ErrReleased) {
		t.Errorf("after Release returned: Err() = %v, want ErrReleased", err)
	}
	l2 := mustAcquire(t, m1, "job", leasehold.WithWait(s.patience))
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after releasing %d, want higher", l2.Token(), l.Token())
	}
	if err := l2.Release(ended); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Release(ended ctx) = %v", err)
	}
	// Another owner is not kept out for the minute's TTL either.
	ctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	if _, err := m2.Acquire(ctx, "job", leasehold.WithWait(leasehold.WaitForever)); err != nil {
		t.Errorf("another owner after a release with an ended context: %v", err)
	}
}

// mLossUnconfirmedCleanup: renewals reach the store but their answers are
// lost, so the holder fails closed at its local deadline; its cleanup release
// fails too. The store still has the holding: the same Manager's next Acquire
// must wait for it to end and get a higher token, never refresh it.
func (s *suite) mLossUnconfirmedCleanup(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(4)
	l := mustAcquire(t, m, "job", leasehold.WithTTL(s.short))
	p.f.FailAfterRenew.Store(true)
	p.f.FailRelease.Store(true)
	lostWithin(t, l, sub, s.patience, leasehold.ReasonExpired)
	p.f.FailAfterRenew.Store(false)
	l2, err := m.Acquire(ctxT(t), "job", leasehold.WithWait(s.patience))
	if err != nil {
		t.Fatalf("Acquire after the loss: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after the lost holding's %d, want higher", l2.Token(), l.Token())
	}
}

// mSameOwnerTwoManagers: two Managers (two processes) configured with the
// same owner are two contenders, never one holder.
func (s *suite) mSameOwnerTwoManagers(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "same"), p.manager(t, "same")
	l1 := mustAcquire(t, m1, "job")
	l2, err := m2.Acquire(ctxT(t), "job")
	if err == nil {
		t.Fatalf("both Managers of owner %q hold the lease (tokens %d and %d)", "same", l1.Token(), l2.Token())
	}
	wantNotAcquired(t, err)
	var nae *leasehold.NotAcquiredError
	if errors.As(err, &nae) && nae.Holder != "same" {
		t.Errorf("holder %q, want %q", nae.Holder, "same")
	}
}

// mNotAcquiredNamesHolder: every refusal says who really holds the lease:
// after a wait that polled and ran out, and for a one-attempt Acquire queued
// behind a local waiter.
func (s *suite) mNotAcquiredNamesHolder(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	l1 := mustAcquire(t, m1, "job", leasehold.WithTTL(time.Minute))
	check := func(what string, err error) {
		t.Helper()
		var nae *leasehold.NotAcquiredError
		if !errors.As(err, &nae) {
			t.Fatalf("%s: %v, want a NotAcquiredError", what, err)
		}
		if nae.Holder != "o1" || nae.HolderExpiresAt.IsZero() {
			t.Errorf("%s: holder %q until %v, want o1 with its expiry (%v)", what, nae.Holder, nae.HolderExpiresAt, l1.ExpiresAt())
		}
	}
	_, err := m2.Acquire(ctxT(t), "job", leasehold.WithWait(150*time.Millisecond))
	check("after a wait", err)

	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	before := p.f.Acquires.Load()
	go func() {
		_, err := m2.Acquire(ctx, "job", leasehold.WithWait(leasehold.WaitForever))
		waiting <- err
	}()
	s.eventually(t, "the waiter's first attempt", func() bool { return p.f.Acquires.Load() > before })
	_, err = m2.Acquire(ctxT(t), "job")
	check("one attempt behind a local waiter", err)
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled waiter: %v", err)
	}
}
