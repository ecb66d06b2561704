package leaseholdtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// Batched renewals: per-lease results, failures that fail closed per lease, no starvation.

// mBatchMixed: renewals batched together get their own results: the leases
// taken away behind the Manager's back are lost as rejected, the rest stay.
func (s *suite) mBatchMixed(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(32)
	const n, stolen = 20, 5
	var ls []*leasehold.Lease
	for i := range n {
		// A long TTL, renewed often: no lease is lost for being slow.
		ls = append(ls, mustAcquire(t, m, fmt.Sprint("l", i), leasehold.WithTTL(time.Minute), leasehold.WithRenewEvery(s.often)))
	}
	ctx := ctxT(t)
	for _, l := range ls[:stolen] {
		key := p.prefix + l.Name()
		if err := p.raw.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o1", Attempt: p.f.AttemptOf(key), Token: l.Token()}); err != nil {
			t.Fatal(err)
		}
		if g, err := p.raw.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "thief", Attempt: "thief", TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("thief: %+v, %v", g, err)
		}
	}
	for _, l := range ls[:stolen] {
		waitClosed(t, "loss of a stolen lease", l.Lost(), s.patience)
		if !errors.Is(l.Err(), backend.ErrNotHeld) {
			t.Errorf("%s: %v, want rejected (ErrNotHeld)", l.Name(), l.Err())
		}
	}
	for range stolen {
		if ev := <-sub.Events(); ev.Reason != leasehold.ReasonRejected {
			t.Errorf("event %+v, want ReasonRejected", ev)
		}
	}
	// Another round of renewals for the rest, after the losses.
	marks := map[*leasehold.Lease]time.Time{}
	for _, l := range ls[stolen:] {
		marks[l] = l.ExpiresAt()
	}
	s.eventually(t, "a renewal of every remaining lease", func() bool {
		for l, at := range marks {
			if !l.ExpiresAt().After(at) && l.Err() == nil {
				return false
			}
		}
		return true
	})
	for _, l := range ls[stolen:] {
		if err := l.Err(); err != nil {
			t.Errorf("%s lost with its batch: %v", l.Name(), err)
		}
	}
	if p.f.RenewBatches.Load() == 0 {
		t.Error("no renewal went through a batch")
	}
}

// mBatchFailure: a failed batch fails closed for each lease by its own local
// deadline, not earlier and not later.
func (s *suite) mBatchFailure(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	ttls := []time.Duration{s.short, 2 * s.short, 4 * s.short}
	var ls []*leasehold.Lease
	for i, ttl := range ttls {
		ls = append(ls, mustAcquire(t, m, fmt.Sprint("l", i), leasehold.WithTTL(ttl)))
	}
	p.f.FailRenew.Store(true)
	failedAt := time.Now()
	for i, l := range ls {
		// Not earlier: a lease is never lost before its local deadline,
		// which is at least 0.9 TTL after the renewal last confirmed (and
		// at least half a TTL after the batches started failing).
		if l.Err() != nil && time.Since(failedAt) < ttls[i]/2 {
			t.Errorf("%s (TTL %v) lost %v after the batches started failing", l.Name(), ttls[i], time.Since(failedAt))
		}
		// Not later: the last renewal that could succeed was sent before
		// the batches started failing, so the local deadline falls less
		// than a TTL after that.
		failedClosedBy(t, l, failedAt.Add(ttls[i]))
		waitClosed(t, "loss", l.Lost(), s.patience)
	}
}

// mBatchStarvation: with tiny batches, every lease still gets renewed: none
// waits for a batch that never comes. (Long TTLs, so that a slow machine makes
// renewals late, never lost; starvation would leave some lease unrenewed.)
func (s *suite) mBatchStarvation(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1", leasehold.WithRenewBatching(4, 5*time.Millisecond))
	var ls []*leasehold.Lease
	for i := range 100 {
		ls = append(ls, mustAcquire(t, m, fmt.Sprint("l", i), leasehold.WithTTL(time.Minute), leasehold.WithRenewEvery(s.often)))
	}
	marks := map[*leasehold.Lease]time.Time{}
	for _, l := range ls {
		marks[l] = l.ExpiresAt()
	}
	within := 6 * s.patience // 30 s, stretched
	deadline := time.Now().Add(within)
	for l, at := range marks {
		for !l.ExpiresAt().After(at) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never renewed in %v (renew period %v, batches of 4)", l.Name(), within, s.often)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := l.Err(); err != nil {
			t.Errorf("%s: %v", l.Name(), err)
		}
	}
}
