package leaseholdtest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// Held, Inspect (any owner's holding) and a holding revoked behind the
// Manager's back: the operator's view through a Manager.

func (s *suite) mHeld(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	a := mustAcquire(t, m, "a", leasehold.WithMetadata("host=a"))
	mustAcquire(t, m, "b")
	held := m.Held()
	if len(held) != 2 || held[0].Name != "a" || held[0].Metadata != "host=a" || held[0].Token != a.Token() || held[0].Owner != "o1" || held[1].Name != "b" {
		t.Errorf("Held() = %+v", held)
	}
	if a.Name() != "a" || a.Owner() != "o1" {
		t.Errorf("Name/Owner = %q/%q", a.Name(), a.Owner())
	}
	// The Manager's backend is the Faulty, whose Info is the raw backend's
	// but for what it changes of the engine's use (Inline, Batches).
	want := p.raw.Info()
	want.Inline, want.Batches = false, false
	if m.BackendInfo() != want || m.BackendInfo() != p.b.Info() {
		t.Errorf("BackendInfo() = %+v, want %+v", m.BackendInfo(), want)
	}
}

func (s *suite) mInspect(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	ctx := ctxT(t)
	if _, held, err := m2.Inspect(ctx, "job"); err != nil || held {
		t.Fatalf("Inspect of a free name = held %v, %v", held, err)
	}
	l := mustAcquire(t, m1, "job", leasehold.WithMetadata("host=a"))
	info, held, err := m2.Inspect(ctx, "job")
	if err != nil || !held || info.Name != "job" || info.Owner != "o1" || info.Token != l.Token() || info.Metadata != "host=a" || info.ExpiresAt.IsZero() {
		t.Errorf("Inspect = %+v, held %v, %v; want o1's lease", info, held, err)
	}
	if _, _, err := m2.Inspect(ctx, ""); !errors.Is(err, leasehold.ErrInvalidName) {
		t.Errorf("Inspect(\"\") = %v, want ErrInvalidName", err)
	}
}

func (s *suite) mRevoked(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(4)
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Minute))
	if _, removed, err := p.raw.Revoke(ctxT(t), p.prefix+"job", l.Token()); err != nil || !removed {
		t.Fatalf("Revoke: removed %v, %v", removed, err)
	}
	if err := l.Renew(ctxT(t), 0); !errors.Is(err, leasehold.ErrLost) {
		t.Errorf("Renew after Revoke = %v, want ErrLost", err)
	}
	lostWithin(t, l, sub, s.patience, leasehold.ReasonRejected)
}
