package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// bExpiredNotRevived: a Renew (or a batched renewal) of a holding whose TTL
// has run out is refused with ErrNotHeld even when nobody has taken the key
// since: the holder's local deadline has passed, so it has stopped working
// under the lease, and a revived holding would be one that nobody runs.
func (s *suite) bExpiredNotRevived(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	s.expiredNotRevived(t, b, mustGrant(t, b, k, "o1", s.tiny))
}

// lExpiredNotRevived is bExpiredNotRevived for a slot of a limit.
func (s *suite) lExpiredNotRevived(t *testing.T) {
	b, k := s.limitBackend(t, 2, false), uniq(t)
	s.expiredNotRevived(t, b, mustSlot(t, b, k, "o1", 2, s.tiny))
}

func (s *suite) expiredNotRevived(t *testing.T, b backend.Backend, g held) {
	t.Helper()
	ctx := ctxT(t)
	s.eventually(t, "the holding to expire", func() bool {
		_, ok, err := b.Inspect(ctx, g.key)
		return err == nil && !ok
	})
	// A store may show a key free in its holding's last moments, and keep
	// it a little longer than asked (etcd reads a lease's time left in
	// whole seconds, and grants at least its minimum TTL): expiry sends no
	// signal, so the store's clock (this host's) is let pass the TTL well,
	// as ExpiryFreesKeyAndTokensIncrease does.
	time.Sleep(3 * s.tiny)
	if _, err := b.Renew(ctx, g.renewReq(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew of an expired holding nobody took = %v, want ErrNotHeld", err)
	}
	res, err := b.RenewBatch(ctx, []backend.RenewRequest{g.renewReq(time.Minute)})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, backend.ErrNotHeld) {
		t.Errorf("RenewBatch of an expired holding nobody took = %+v, %v; want its ErrNotHeld", res, err)
	}
	if h, ok, err := b.Inspect(ctx, g.key); err != nil || ok {
		t.Errorf("after those renewals Inspect = %+v, %v, %v; want the key free", h, ok, err)
	}
}

// bExactNames: names that differ only by trailing spaces or by case are
// separate leases, through grants, batched renewals and expiry (a SQL
// store compares strings with trailing spaces ignored, and often case too,
// unless told otherwise).
func (s *suite) bExactNames(t *testing.T) {
	s.exactNames(t, s.newBackend(t), 1)
}

// lExactNames is bExactNames for names under a limit.
func (s *suite) lExactNames(t *testing.T) {
	s.exactNames(t, s.limitBackend(t, 2, false), 2)
}

func (s *suite) exactNames(t *testing.T, b backend.Backend, n int) {
	t.Helper()
	ctx := ctxT(t)
	base := uniq(t)
	keys := []string{base + "s", base + "s ", base + "S", base + "s  "}
	gs := make([]held, len(keys))
	rs := make([]backend.RenewRequest, len(keys))
	// A TTL with room for four acquires and the batch on a loaded machine:
	// the renewal must reach every holding before its acquire's TTL ends.
	ttl := 4 * s.short
	var latest time.Time // the last acquire's expiry, on the store's clock
	for i, k := range keys {
		gs[i] = slotAs(t, b, k, "o"+string(rune('1'+i)), newAttempt(), n, ttl, backend.QueueRequest{})
		if gs[i].ExpiresAt.After(latest) {
			latest = gs[i].ExpiresAt
		}
		if !gs[i].Acquired {
			t.Fatalf("Acquire(%q) = %+v: refused although only %q and the like are held", k, gs[i].Grant, keys[0])
		}
		rs[i] = gs[i].renewReq(time.Minute)
	}
	res, err := b.RenewBatch(ctx, rs)
	if err != nil || len(res) != len(keys) {
		t.Fatalf("RenewBatch = %+v, %v", res, err)
	}
	for i, r := range res {
		if r.Err != nil || r.Grant.Token != gs[i].Token {
			t.Errorf("RenewBatch[%q] = %+v, want its own holding renewed", keys[i], r)
		}
	}
	// Past the acquires' expiry (the store's clock is this host's): each
	// name stays held by its renewed holding.
	time.Sleep(time.Until(latest) + s.short)
	for i, k := range keys {
		h, ok, err := b.Inspect(ctx, k)
		if err != nil || !ok || h.Owner != gs[i].owner || h.Token != gs[i].Token || h.Key != k {
			t.Errorf("Inspect(%q) = %+v, %v, %v; want %s's renewed holding", k, h, ok, err, gs[i].owner)
		}
		other, err := b.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: "intruder", Attempt: newAttempt(), TTL: time.Minute})
		if err == nil && other.Acquired {
			t.Errorf("an exclusive Acquire(%q) was granted while %s's renewed holding is live", k, gs[i].owner)
		}
	}
	for i := range keys {
		if err := b.Release(ctx, gs[i].releaseReq()); err != nil {
			t.Errorf("Release(%q): %v", keys[i], err)
		}
	}
}
