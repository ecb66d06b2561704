package leaseholdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/backendtest"
)

// mBlackholed: with the link to the store black-holed (nothing answers,
// nothing is refused), every call of a Manager returns within its context
// plus backendtest.CtxSlack with the context's error, cancelled or at its
// deadline: Acquire, Lease.Renew, Lease.Release, Inspect, and Close, which
// also answers an acquire in flight with ErrClosed.
func (s *suite) mBlackholed(t *testing.T) {
	if s.blackhole == nil {
		t.Skip("this backend's test supplies no link to black-hole (Options.Blackhole)")
	}
	b, blackhole := s.blackhole(t)
	prefix := uniq(t)
	// Managers of its own: Close is under test, a Close that ran out of
	// time keeps reporting it, and the link is still a black hole when they
	// are closed at the end (their releases are left to the TTL).
	manager := func(owner string) *leasehold.Manager {
		m, err := leasehold.New(b, leasehold.WithOwner(owner), leasehold.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), backendtest.CtxSlack)
			defer cancel()
			_ = m.Close(ctx)
		})
		return m
	}
	m, closing := manager("o1"), map[bool]*leasehold.Manager{true: manager("o2"), false: manager("o3")}
	released := map[bool]*leasehold.Lease{}
	for cancelled, suffix := range map[bool]string{true: "-c", false: "-d"} {
		released[cancelled] = mustAcquire(t, m, "released"+suffix, leasehold.WithTTL(time.Minute))
		mustAcquire(t, closing[cancelled], "closed"+suffix, leasehold.WithTTL(time.Minute))
	}
	l := mustAcquire(t, m, "held", leasehold.WithTTL(time.Minute))
	blackhole()

	variants := []struct {
		name      string
		cancelled bool
	}{{"Cancelled", true}, {"Deadline", false}}
	for _, v := range variants {
		t.Run("Acquire/"+v.name, func(t *testing.T) {
			backendtest.EndsWithContext(t, v.cancelled, func(ctx context.Context) error {
				_, err := m.Acquire(ctx, "free", leasehold.WithTTL(time.Minute))
				return err
			})
		})
		t.Run("Renew/"+v.name, func(t *testing.T) {
			backendtest.EndsWithContext(t, v.cancelled, func(ctx context.Context) error { return l.Renew(ctx, 0) })
		})
		t.Run("Inspect/"+v.name, func(t *testing.T) {
			backendtest.EndsWithContext(t, v.cancelled, func(ctx context.Context) error { _, _, err := m.Inspect(ctx, "held"); return err })
		})
		t.Run("Release/"+v.name, func(t *testing.T) {
			backendtest.EndsWithContext(t, v.cancelled, released[v.cancelled].Release)
		})
		t.Run("Close/"+v.name, func(t *testing.T) {
			mc := closing[v.cancelled]
			inFlight := make(chan error, 1)
			go func() {
				_, err := mc.Acquire(context.Background(), "free", leasehold.WithTTL(time.Minute))
				inFlight <- err
			}()
			backendtest.EndsWithContext(t, v.cancelled, mc.Close)
			select {
			case err := <-inFlight:
				if !errors.Is(err, leasehold.ErrClosed) {
					t.Errorf("an acquire in flight during Close: %v, want ErrClosed", err)
				}
			case <-time.After(backendtest.CtxSlack):
				t.Error("an acquire in flight was not answered once Close returned")
			}
		})
	}
}
