package leaseholdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// Loss: by expiry, by a renewal that cannot be confirmed, by rejection.

// lostWithin waits for l to be lost and checks every signal of the loss.
func lostWithin(t *testing.T, l *leasehold.Lease, sub *leasehold.Subscription, within time.Duration, reason leasehold.LostReason) {
	t.Helper()
	waitClosed(t, "loss", l.Lost(), within)
	if !errors.Is(l.Err(), leasehold.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", l.Err())
	}
	if !errors.Is(context.Cause(l.Context()), leasehold.ErrLost) || l.Context().Err() == nil {
		t.Errorf("Context cause = %v, want ErrLost", context.Cause(l.Context()))
	}
	select {
	case ev := <-sub.Events():
		if ev.Name != l.Name() || ev.Token != l.Token() || ev.Reason != reason || !errors.Is(ev.Err, leasehold.ErrLost) || ev.Owner != l.Owner() {
			t.Errorf("event %+v, want %s lost with reason %v", ev, l.Name(), reason)
		}
	case <-time.After(within):
		t.Error("no LostEvent")
	}
}

// failedClosedBy checks that l counts as lost at by, a TTL after its
// Acquire returned: its local deadline (the acquire's send time plus TTL
// minus the margin) is earlier still, and the handle checks it by itself, so
// no timer, however late on a loaded machine, is needed for this to hold.
func failedClosedBy(t *testing.T, l *leasehold.Lease, by time.Time) {
	t.Helper()
	time.Sleep(time.Until(by)) // the point in time under test, not a synchronisation
	if err := l.Err(); !errors.Is(err, leasehold.ErrLost) {
		t.Errorf("%s a TTL after its Acquire returned: Err() = %v, want ErrLost (fail closed)", l.Name(), err)
	}
}

func (s *suite) mExpiry(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(4)
	l := mustAcquire(t, m, "job", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	failedClosedBy(t, l, time.Now().Add(s.short))
	lostWithin(t, l, sub, s.patience, leasehold.ReasonExpired)
	if len(m.Held()) != 0 {
		t.Errorf("Held() = %v after loss", m.Held())
	}
}

func (s *suite) mRenewImpossible(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(4)
	ttl := 4 * s.short // room for several retries
	p.f.FailRenew.Store(true)
	l := mustAcquire(t, m, "job", leasehold.WithTTL(ttl))
	failedClosedBy(t, l, time.Now().Add(ttl))
	lostWithin(t, l, sub, s.patience, leasehold.ReasonExpired)
	if n := p.f.Renews.Load(); n < 2 {
		t.Errorf("%d renewal attempts, want retries until the deadline", n)
	}
}

func (s *suite) mRejected(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(4)
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Minute))
	// Someone with the owner's credentials deletes it behind its back.
	if err := p.raw.Release(ctxT(t), backend.ReleaseRequest{Key: p.prefix + "job", Owner: "o1", Attempt: p.f.AttemptOf(p.prefix + "job"), Token: l.Token()}); err != nil {
		t.Fatal(err)
	}
	err := l.Renew(ctxT(t), 0)
	if !errors.Is(err, leasehold.ErrLost) || !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("Renew = %v, want ErrLost (ErrNotHeld)", err)
	}
	lostWithin(t, l, sub, s.patience, leasehold.ReasonRejected)
}
