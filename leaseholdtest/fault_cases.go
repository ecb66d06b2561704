package leaseholdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/backendtest"
)

// Backend faults: nothing is left unowned, and a fault is never reported as ErrNotAcquired.

// mAbandonedGrant: the caller gives up while its acquire is in flight; the
// grant that arrives later must be released, not left unowned.
func (s *suite) mAbandonedGrant(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	p.f.AcquireDelay.Store(int64(200 * time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := m.Acquire(ctx, "job", leasehold.WithTTL(time.Minute)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	p.f.AcquireDelay.Store(0)
	other := p.manager(t, "o2")
	s.eventually(t, "the abandoned grant to be released", func() bool {
		l, err := other.Acquire(ctxT(t), "job")
		return err == nil && l != nil
	})
	if len(m.Held()) != 0 {
		t.Errorf("Held() = %v", m.Held())
	}
}

// mAmbiguousAcquire: the backend granted but the answer was lost; the engine
// must release whatever it may hold before reporting the error.
func (s *suite) mAmbiguousAcquire(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	p.f.FailAfterAcquire.Store(true)
	_, err := m.Acquire(ctxT(t), "job", leasehold.WithTTL(time.Minute))
	if !errors.Is(err, backendtest.ErrInjected) || errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatalf("err = %v, want the backend fault (not ErrNotAcquired)", err)
	}
	p.f.FailAfterAcquire.Store(false)
	// Released before the error was returned: free at once, not eventually.
	if _, err := p.manager(t, "o2").Acquire(ctxT(t), "job"); err != nil {
		t.Fatalf("the ambiguous grant was not released before the error was reported: %v", err)
	}
}

func (s *suite) mBackendFault(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job")
	p.f.FailRelease.Store(true)
	err := l.Release(ctxT(t))
	if !errors.Is(err, backendtest.ErrInjected) {
		t.Errorf("Release = %v, want the backend fault", err)
	}
	if !errors.Is(l.Err(), leasehold.ErrReleased) {
		t.Errorf("handle after a failed release: %v, want ended with ErrReleased", l.Err())
	}
}
