package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// inspectCases check the operator's view of the store, required of every
// backend: who holds a key (Inspect), listing by prefix (List) and ending a
// holding by force (Revoke).
func (s *suite) inspectCases() []testCase {
	return []testCase{
		{"InspectShowsTheLiveHolding", s.bInspect},
		{"ListByPrefix", s.bList},
		{"RevokeFencesTheHolder", s.bRevoke},
	}
}

func (s *suite) bInspect(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	if _, held, err := b.Inspect(ctx, k); err != nil || held {
		t.Fatalf("Inspect of a free key = held %v, %v", held, err)
	}
	attempt := newAttempt()
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: "o1", Attempt: attempt, TTL: time.Minute, Metadata: "md"})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	h, held, err := b.Inspect(ctx, k)
	if err != nil || !held {
		t.Fatalf("Inspect of a held key = held %v, %v", held, err)
	}
	if h.Key != k || h.Owner != "o1" || h.Token != g.Token || h.Metadata != "md" || !nearNow(h.ExpiresAt, time.Minute) ||
		h.ExpiresIn <= 50*time.Second || h.ExpiresIn > time.Minute+time.Second {
		t.Errorf("Inspect = %+v, want o1's holding (token %d, metadata md, about a minute left)", h, g.Token)
	}
	if _, _, err := b.Inspect(ctx, ""); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Inspect(\"\") = %v, want ErrInvalidRequest", err)
	}
	short := mustGrant(t, b, k+"short", "o1", s.tiny)
	time.Sleep(3 * s.tiny) // expiry has no signal: let the store's clock pass the TTL
	if h, held, err := b.Inspect(ctx, short.key); err != nil || held {
		t.Errorf("Inspect of an expired holding = %+v, held %v, %v", h, held, err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: k, Owner: "o1", Attempt: attempt, Token: g.Token}); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) bList(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	want := map[string]uint64{}
	for _, sfx := range []string{"a", "b", "c/d", "{x}"} {
		want[k+sfx] = mustGrant(t, b, k+sfx, "o1", time.Minute).Token
	}
	mustGrant(t, b, k[:len(k)-1]+"-other", "o1", time.Minute) // shares all but the last character
	got := map[string]uint64{}
	if err := b.List(ctxT(t), k, func(h backend.Holder) bool { got[h.Key] = h.Token; return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("List(%q) = %v, want %v", k, got, want)
	}
	for key, tok := range want {
		if got[key] != tok {
			t.Errorf("List: %q token %d, want %d", key, got[key], tok)
		}
	}
	n := 0
	if err := b.List(ctxT(t), k, func(backend.Holder) bool { n++; return false }); err != nil || n != 1 {
		t.Errorf("List stopped by fn after %d calls (%v), want 1", n, err)
	}
}

func (s *suite) bRevoke(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	g := mustGrant(t, b, k, "o1", time.Minute)
	if _, removed, err := b.Revoke(ctx, k, g.Token+1); err != nil || removed {
		t.Errorf("Revoke with another token: removed %v, %v; want nothing removed", removed, err)
	}
	h, removed, err := b.Revoke(ctx, k, g.Token)
	if err != nil || !removed || h.Owner != "o1" || h.Token != g.Token {
		t.Fatalf("Revoke = %+v, removed %v, %v", h, removed, err)
	}
	if _, err := b.Renew(ctx, g.renewReq(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("the revoked holder's Renew = %v, want ErrNotHeld", err)
	}
	g2 := mustGrant(t, b, k, "o2", time.Minute)
	if g2.Token <= g.Token {
		t.Errorf("token after revoking %d: %d, want higher", g.Token, g2.Token)
	}
	if _, removed, err := b.Revoke(ctx, k, 0); err != nil || !removed {
		t.Errorf("Revoke(token 0) of a live holding: removed %v, %v", removed, err)
	}
	if _, removed, err := b.Revoke(ctx, k, 0); err != nil || removed {
		t.Errorf("Revoke of a free key: removed %v, %v", removed, err)
	}
}
