package leaseholdtest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// Fencing: tokens increase, a stale owner cannot touch a newer holding.

func (s *suite) mFencing(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	var last uint64
	check := func(l *leasehold.Lease, how string) {
		t.Helper()
		if l.Token() <= last {
			t.Fatalf("%s: token %d, want > %d", how, l.Token(), last)
		}
		last = l.Token()
	}
	l := mustAcquire(t, m1, "job")
	check(l, "first grant")
	if err := l.Renew(ctxT(t), 0); err != nil || l.Token() != last {
		t.Fatalf("renew changed the token or failed: %d, %v", l.Token(), err)
	}
	_ = l.Release(ctxT(t))
	l = mustAcquire(t, m1, "job", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	check(l, "after release, same owner")
	l = mustAcquire(t, m2, "job", leasehold.WithWait(s.patience))
	check(l, "takeover after expiry")
	_ = l.Release(ctxT(t))
	l = mustAcquire(t, m1, "job")
	check(l, "after another owner's release")
}

func (s *suite) mStaleOwner(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	old := mustAcquire(t, m1, "job", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	cur := mustAcquire(t, m2, "job", leasehold.WithWait(s.patience))
	ctx, key := ctxT(t), p.prefix+"job"
	curAttempt := p.f.AttemptOf(key)
	if _, err := p.raw.Renew(ctx, backend.RenewRequest{Key: key, Owner: "o1", Attempt: curAttempt, Token: old.Token(), TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("stale owner's Renew = %v, want ErrNotHeld", err)
	}
	if _, err := p.raw.Renew(ctx, backend.RenewRequest{Key: key, Owner: "o1", Attempt: curAttempt, Token: cur.Token(), TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("stranger with the current token: Renew = %v, want ErrNotHeld", err)
	}
	_ = p.raw.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o1", Attempt: curAttempt, Token: old.Token()})
	_ = p.raw.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o1", Attempt: curAttempt})
	_ = p.raw.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o2", Attempt: "stale", Token: old.Token()})
	if err := cur.Renew(ctx, 0); err != nil {
		t.Errorf("current holder's Renew after stale releases: %v", err)
	}
	if err := old.Release(ctx); err != nil {
		t.Errorf("stale handle's Release = %v, want nil", err)
	}
	if cur.Err() != nil {
		t.Errorf("current holding ended: %v", cur.Err())
	}
}
