package leaseholdtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// Renewal: explicit, automatic, on released handles and with cancelled contexts.

func (s *suite) mRenewReleased(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job", leasehold.WithoutAutoRenew())
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	before := p.f.Calls()
	if err := l.Renew(ctxT(t), 0); !errors.Is(err, leasehold.ErrReleased) {
		t.Fatalf("Renew after Release = %v, want ErrReleased", err)
	}
	if p.f.Calls() != before {
		t.Error("Renew on a released handle called the backend")
	}
	select {
	case <-l.Lost():
		t.Error("Lost() closed by a release")
	default:
	}
	if !errors.Is(context.Cause(l.Context()), leasehold.ErrReleased) {
		t.Errorf("Context cause = %v, want ErrReleased", context.Cause(l.Context()))
	}
}

func (s *suite) mRenewCancelled(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job", leasehold.WithoutAutoRenew())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := p.f.Calls()
	if err := l.Renew(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Renew = %v, want context.Canceled", err)
	}
	if p.f.Calls() != before {
		t.Error("Renew with a cancelled context called the backend")
	}
	if l.Err() != nil {
		t.Errorf("handle ended: %v", l.Err())
	}
	if err := l.Renew(ctxT(t), -time.Second); !errors.Is(err, leasehold.ErrInvalidOption) {
		t.Errorf("Renew(-1s) = %v, want ErrInvalidOption", err)
	}
}

func (s *suite) mExplicitRenew(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Minute), leasehold.WithoutAutoRenew())
	exp, tok := l.ExpiresAt(), l.Token()
	time.Sleep(10 * time.Millisecond) // so that the store's clock moves on
	if err := l.Renew(ctxT(t), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if l.Token() != tok || !l.ExpiresAt().After(exp.Add(30*time.Second)) {
		t.Errorf("after Renew(2m): token %d (was %d), expires %v (was %v)", l.Token(), tok, l.ExpiresAt(), exp)
	}
	// Concurrent explicit renewals all get answers.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := l.Renew(context.Background(), 0); err != nil {
				t.Errorf("concurrent Renew: %v", err)
			}
		})
	}
	wg.Wait()
}

func (s *suite) mAutoRenew(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(1)
	ttl := 3 * s.short // a renewal may take up to 0.57 TTL: room on a loaded machine
	l := mustAcquire(t, m, "job", leasehold.WithTTL(ttl))
	first := l.ExpiresAt()
	time.Sleep(3 * ttl) // the lease must outlive this
	if err := l.Err(); err != nil {
		t.Fatalf("lost despite auto-renewal: %v", err)
	}
	if !l.ExpiresAt().After(first) {
		t.Errorf("ExpiresAt did not move: %v", first)
	}
	if n := p.f.Renews.Load(); n < 3 {
		t.Errorf("%d renewals in 3 TTLs, want about 9", n)
	}
	// Nobody else could take it meanwhile.
	_, err := p.manager(t, "o2").Acquire(ctxT(t), "job")
	wantNotAcquired(t, err)
	select {
	case ev := <-sub.Events():
		t.Errorf("unexpected loss event %+v", ev)
	default:
	}
}

// mShorterRenewalFailsClosed: a renewal with a shorter TTL than the one
// confirmed last shortens the lease on the store when it is applied, also
// when its answer is lost. The holder must count its holding lost by that
// shorter TTL: another Manager gets the name once the store's shorter expiry
// passes, and by then the first holder must no longer believe it holds it.
func (s *suite) mShorterRenewalFailsClosed(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	other := p.manager(t, "o2")
	l := mustAcquire(t, m, "job", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	if err := l.Renew(ctxT(t), 8*s.short); err != nil {
		t.Fatal(err)
	}
	p.f.FailAfterRenew.Store(true)
	if err := l.Renew(ctxT(t), s.short); err == nil {
		t.Fatal("a renewal whose answer was lost reported success")
	}
	p.f.FailAfterRenew.Store(false)
	l2, err := other.Acquire(ctxT(t), "job", leasehold.WithWait(40*s.short)) // it comes about one short TTL after the failed renewal
	if err != nil {
		t.Fatalf("the other Manager did not get the name after the shorter renewal's TTL: %v", err)
	}
	if l.Err() == nil {
		t.Errorf("two holders: o1 still holds %q (token %d) while o2 has it (token %d)", "job", l.Token(), l2.Token())
	}
	_ = l2.Release(ctxT(t))
}

// mExplicitRenewDuringAutomatic: explicit Renews racing automatic renewals
// (scheduled, or already sent by the renewer) are all answered, none fails,
// and the lease is never lost.
func (s *suite) mExplicitRenewDuringAutomatic(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	every := s.short / 25
	l := mustAcquire(t, m, "job", leasehold.WithTTL(20*s.short), leasehold.WithRenewEvery(every))
	exp := l.ExpiresAt()
	// For ten renewal periods at least (however many Renews that takes on
	// this machine): automatic renewals are scheduled and sent meanwhile.
	for i, start := 0, time.Now(); i < 20 || time.Since(start) < 10*every; i++ {
		ttl := time.Duration(0)
		if i%3 == 1 {
			ttl = 30 * s.short // another TTL now and then
		}
		if err := l.Renew(ctxT(t), ttl); err != nil {
			t.Fatalf("Renew %d: %v", i, err)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lost: %v", err)
	}
	if !l.ExpiresAt().After(exp) {
		t.Errorf("expiry %v, not after %v", l.ExpiresAt(), exp)
	}
}

// mRefusedRenew: a Renew whose TTL the store cannot keep (on etcd 1.5 s, not
// a whole number of seconds; elsewhere below the shortest TTL any backend
// takes) is ErrInvalidOption before any backend call, and changes nothing:
// the lease is held, its expiry and its local deadline as they were (it
// outlives the refused TTL), and it renews as before. (On etcd the local
// deadline used to drop to the refused TTL's before the store refused it,
// and the lease was lost early.)
func (s *suite) mRefusedRenew(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	ttl := 4 * s.short
	l := mustAcquire(t, m, "job", leasehold.WithTTL(ttl), leasehold.WithoutAutoRenew())
	bad := backend.MinTTL / 2
	if u := p.raw.Info().TTLUnit; u > 0 {
		bad = max(u, p.raw.Info().MinTTL) + u/2
	}
	exp, before := l.ExpiresAt(), p.f.Calls()
	if err := l.Renew(ctxT(t), bad); !errors.Is(err, leasehold.ErrInvalidOption) {
		t.Fatalf("Renew(%v) = %v, want ErrInvalidOption", bad, err)
	}
	if n := p.f.Calls() - before; n != 0 {
		t.Errorf("a refused Renew made %d backend calls", n)
	}
	if !l.ExpiresAt().Equal(exp) || l.Err() != nil {
		t.Fatalf("after a refused Renew: expires %v (was %v), err %v", l.ExpiresAt(), exp, l.Err())
	}
	wait := max(bad, s.short) // past the refused TTL's deadline, well before the lease's own (0.9 × 4 short)
	select {
	case <-l.Lost():
		t.Fatalf("lost after a refused Renew(%v) of a %v lease: %v", bad, ttl, l.Err())
	case <-time.After(wait):
	}
	if err := l.Renew(ctxT(t), 0); err != nil {
		t.Fatalf("Renew after the refused one: %v", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lost: %v", err)
	}
}
