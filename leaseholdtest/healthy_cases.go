package leaseholdtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// A lease on a healthy store is never lost.

// mBurstThenRenew: a burst of short jobs with the default TTL, each released
// before its first renewal (64 of them: each leaves a stale slot in the
// renewer, as many as set off its compaction), then a lease that must renew,
// and more jobs while it holds. The lease renews throughout and is never
// lost. (The renewal that set off the compaction used to be dropped: never
// sent, and the lease expired on a healthy store.)
func (s *suite) mBurstThenRenew(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(8)
	job := 0
	jobs := func(n int) {
		for range n {
			l := mustAcquire(t, m, fmt.Sprint("job", job))
			if err := l.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			job++
		}
	}
	jobs(64)
	ttl := 3 * s.short
	l := mustAcquire(t, m, "leader", leasehold.WithTTL(ttl))
	renewed := func(what string) {
		t.Helper()
		exp := l.ExpiresAt()
		deadline := time.After(2 * ttl) // a renewal is due every TTL/3
		for l.ExpiresAt().Equal(exp) {
			select {
			case <-l.Lost():
				t.Fatalf("%s: the lease was lost on a healthy store: %v", what, l.Err())
			case <-deadline:
				t.Fatalf("%s: no renewal confirmed in %v (TTL %v)", what, 2*ttl, ttl)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	renewed("after 64 short jobs")
	jobs(70) // enough stale slots for a compaction while the lease holds
	renewed("after 70 more")
	if err := l.Err(); err != nil {
		t.Fatalf("lost: %v", err)
	}
	select {
	case ev := <-sub.Events():
		t.Errorf("loss event on a healthy store: %+v", ev)
	default:
	}
}
