package backendtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// limitCases check keys with several holders (backend/limit.go). Each row
// that needs a limit n above 1 runs only on a store whose Info.MaxLimit is
// at least n; the rows about limit 1 and bad limits run on every store.
func (s *suite) limitCases() []testCase {
	return []testCase{
		{"LimitOneIsTheExclusiveLease", s.lExclusive},
		{"BadLimitIsInvalidRequest", s.lBadLimit},
		{"LimitAboveTheStoresIsRefused", s.lAboveMax},
		{"AtMostNHoldersTokensIncrease", s.lAtMostN},
		{"SameAttemptRefreshesItsSlot", s.lRetry},
		{"ReleaseHandsTheSlotOnInArrivalOrder", s.lFIFO},
		{"OtherLimitRefusedChangingNothing", s.lMismatch},
		{"ExpiryFreesOneSlot", s.lExpiry},
		{"HeadsHaveTheirTurnAfterAnExpiry", s.lHeadsTurn},
		{"DeadWaiterIsSkipped", s.lDeadWaiter},
		{"DeadHeadsTurnPasses", s.lDeadHeadsTurn},
		{"FreedSlotsGoToHeadsWhileOneIsHandedOn", s.lFreedToHeads},
		{"RevokeFreesOneSlotAndHandsItOn", s.lRevoke},
		{"RenewOfAnExpiredSlotIsNotHeld", s.lExpiredNotRevived},
		{"NamesDifferingByTrailingSpacesOrCaseAreSeparate", s.lExactNames},
	}
}

// limitBackend is a store that grants limit n, or skips the test.
func (s *suite) limitBackend(t *testing.T, n int, queue bool) backend.Backend {
	t.Helper()
	b := s.newBackend(t)
	info := b.Info()
	if info.MaxLimit < n {
		t.Skipf("%s grants at most %d holders per key (Info.MaxLimit); this row needs %d", info.Name, max(info.MaxLimit, 1), n)
	}
	if queue && !info.Queue {
		t.Skipf("%s keeps no waiter queue (waiters poll)", info.Name)
	}
	return b
}

// slotAs acquires one of limit n's slots of key as attempt, with q (the zero
// QueueRequest: no queue entry; a QueueRequest: waiting).
func slotAs(t *testing.T, b backend.Backend, key, owner, attempt string, n int, ttl time.Duration, q backend.QueueRequest) held {
	t.Helper()
	r := backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: ttl, Limit: n}
	if q != (backend.QueueRequest{}) {
		r.Wait, r.Queue = true, q
	}
	g, err := b.Acquire(ctxT(t), r)
	if err != nil {
		t.Fatalf("Acquire(%q, %q, limit %d): %v", key, owner, n, err)
	}
	return held{Grant: g, key: key, owner: owner, attempt: attempt}
}

func mustSlot(t *testing.T, b backend.Backend, key, owner string, n int, ttl time.Duration) held {
	t.Helper()
	h := slotAs(t, b, key, owner, newAttempt(), n, ttl, backend.QueueRequest{})
	mustBeGranted(t, h)
	return h
}

// queueSlot makes a new attempt wait for one of n slots and checks that it
// was queued.
func queueSlot(t *testing.T, b backend.Backend, key, owner string, n int, q backend.QueueRequest) held {
	t.Helper()
	w := slotAs(t, b, key, owner, newAttempt(), n, time.Minute, q)
	if w.Acquired || !w.Queued {
		t.Fatalf("%s's waiting Acquire (limit %d) = %+v, want a refusal with Queued", owner, n, w.Grant)
	}
	return w
}

// holders is b.Holders(key), which must not fail.
func holders(t *testing.T, b backend.Backend, key string) []backend.Holder {
	t.Helper()
	hs, err := b.Holders(ctxT(t), key)
	if err != nil {
		t.Fatalf("Holders(%q): %v", key, err)
	}
	return hs
}

// mustHolders checks that key's live holdings are exactly hs' (in token
// order), each with limit n.
func mustHolders(t *testing.T, b backend.Backend, key string, n int, hs ...held) {
	t.Helper()
	got := holders(t, b, key)
	if len(got) != len(hs) {
		t.Fatalf("Holders(%q) = %+v, want %d holdings", key, got, len(hs))
	}
	for i, h := range hs {
		if got[i].Owner != h.owner || got[i].Token != h.Token || got[i].Limit != n || got[i].Key != key {
			t.Errorf("Holders(%q)[%d] = %+v, want %s's holding, token %d, limit %d", key, i, got[i], h.owner, h.Token, n)
		}
	}
}

// Limit 1 is today's lease: a second attempt is refused as by an exclusive
// holding (no HeldLimit), whichever of 0 and 1 each asks for, and Holders
// lists the one holding with limit 1.
func (s *suite) lExclusive(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g := mustSlot(t, b, k, "o1", 1, time.Minute)
	for _, n := range []int{0, 1} {
		r := slotAs(t, b, k, "o2", newAttempt(), n, time.Minute, backend.QueueRequest{})
		mustBeBusyBy(t, r, g, time.Minute)
		if r.HeldLimit != 0 {
			t.Errorf("limit %d refused by an exclusive holding: HeldLimit %d, want 0 (no disagreement)", n, r.HeldLimit)
		}
	}
	mustHolders(t, b, k, 1, g)
	if err := b.Release(ctxT(t), g.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if hs := holders(t, b, k); len(hs) != 0 {
		t.Errorf("Holders after the release = %+v, want none", hs)
	}
}

// A limit below 0 or above backend.MaxLimit is ErrInvalidRequest on every
// store, and changes nothing.
func (s *suite) lBadLimit(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	for _, n := range []int{-1, backend.MaxLimit + 1} {
		_, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: k, Owner: "o1", Attempt: newAttempt(), TTL: time.Minute, Limit: n})
		if !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Acquire with limit %d: %v, want ErrInvalidRequest", n, err)
		}
	}
	if hs := holders(t, b, k); len(hs) != 0 {
		t.Errorf("Holders after refused acquires = %+v, want none", hs)
	}
	mustGrant(t, b, k, "o2", time.Minute)
}

// A store refuses a limit above its own Info.MaxLimit, rather than grant a
// holding that other callers could not tell from an exclusive one: the error
// wraps ErrInvalidRequest and errors.ErrUnsupported, and nothing changes.
func (s *suite) lAboveMax(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	info := b.Info()
	n := max(info.MaxLimit, 1) + 1
	if n > backend.MaxLimit {
		t.Skipf("%s grants every limit up to backend.MaxLimit", info.Name)
	}
	_, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: k, Owner: "o1", Attempt: newAttempt(), TTL: time.Minute, Limit: n})
	if !errors.Is(err, backend.ErrInvalidRequest) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Acquire with limit %d on a store of MaxLimit %d: %v, want ErrInvalidRequest and errors.ErrUnsupported", n, info.MaxLimit, err)
	}
	if hs := holders(t, b, k); len(hs) != 0 {
		t.Errorf("Holders after the refused acquire = %+v, want none", hs)
	}
	mustGrant(t, b, k, "o2", time.Minute)
}

// Up to n attempts hold at once, each with a token above the one before;
// the next is refused naming the holding that ends first. Inspect names that
// one too; Holders names them all.
func (s *suite) lAtMostN(t *testing.T) {
	const n = 3
	b, k := s.limitBackend(t, n, false), uniq(t)
	g1 := mustSlot(t, b, k, "o1", n, 2*time.Minute)
	g2 := mustSlot(t, b, k, "o2", n, time.Minute) // ends first
	g3 := mustSlot(t, b, k, "o1", n, 3*time.Minute)
	if !(g1.Token < g2.Token && g2.Token < g3.Token) {
		t.Errorf("tokens %d, %d, %d: want strictly increasing across holders", g1.Token, g2.Token, g3.Token)
	}
	r := slotAs(t, b, k, "o4", newAttempt(), n, time.Minute, backend.QueueRequest{})
	mustBeBusyBy(t, r, g2, time.Minute)
	if r.HeldLimit != 0 {
		t.Errorf("refused by a full key of its own limit: HeldLimit %d, want 0", r.HeldLimit)
	}
	mustHolders(t, b, k, n, g1, g2, g3)
	if h, ok, err := b.Inspect(ctxT(t), k); err != nil || !ok || h.Token != g2.Token {
		t.Errorf("Inspect = %+v, %v, %v; want the holding that ends first (token %d)", h, ok, err, g2.Token)
	}
	// Each holding is its own: renew and release one, the others stay.
	if _, err := b.Renew(ctxT(t), g1.renewReq(time.Minute)); err != nil {
		t.Fatalf("Renew of one holding: %v", err)
	}
	if err := b.Release(ctxT(t), g2.releaseReq()); err != nil {
		t.Fatal(err)
	}
	mustHolders(t, b, k, n, g1, g3)
	g4 := mustSlot(t, b, k, "o4", n, time.Minute)
	if g4.Token <= g3.Token {
		t.Errorf("token %d after %d", g4.Token, g3.Token)
	}
	// Full again: the first to end is g1, renewed before g4 was granted.
	mustBeBusyBy(t, slotAs(t, b, k, "o5", newAttempt(), n, time.Minute, backend.QueueRequest{}), g1, time.Minute)
}

// A retry of the same attempt refreshes its own slot (same token) and takes
// no second one.
func (s *suite) lRetry(t *testing.T) {
	const n = 2
	b, k := s.limitBackend(t, n, false), uniq(t)
	g1 := mustSlot(t, b, k, "o1", n, time.Minute)
	again := slotAs(t, b, k, "o1", g1.attempt, n, 2*time.Minute, backend.QueueRequest{})
	if !again.Acquired || again.Token != g1.Token {
		t.Fatalf("retry of the same attempt = %+v, want its token %d again", again.Grant, g1.Token)
	}
	g2 := mustSlot(t, b, k, "o2", n, time.Minute)
	mustHolders(t, b, k, n, g1, g2)
}

// A full key's waiters are served in arrival order: each release hands its
// one slot to the head waiter in the same step (a newcomer and the other
// waiters stay refused), with a token above every earlier one.
func (s *suite) lFIFO(t *testing.T) {
	const n = 2
	b, k := s.limitBackend(t, n, true), uniq(t)
	a1 := mustSlot(t, b, k, "a1", n, time.Minute)
	a2 := mustSlot(t, b, k, "a2", n, time.Minute)
	w1 := queueSlot(t, b, k, "w1", n, longQueue())
	w2 := queueSlot(t, b, k, "w2", n, longQueue())
	w3 := queueSlot(t, b, k, "w3", n, longQueue())

	release(t, b, a1)
	// Handed on in the same step: w1 holds the slot before it picks it up.
	if hs := holders(t, b, k); len(hs) != n || hs[0].Owner != a2.owner || hs[1].Owner != w1.owner || hs[1].Token <= a2.Token {
		t.Fatalf("Holders right after the release = %+v, want a2's holding and then w1's, handed on with a new token", hs)
	}
	if r := slotAs(t, b, k, "newcomer", newAttempt(), n, time.Minute, backend.QueueRequest{}); r.Acquired {
		t.Fatalf("a newcomer after the release got %+v, want a refusal (the slot was handed to w1)", r.Grant)
	}
	mustWaitSlot(t, b, w2, n)
	mustWaitSlot(t, b, w3, n)
	g1 := pickUpSlot(t, b, w1, n, a2.Token)
	release(t, b, a2)
	g2 := pickUpSlot(t, b, w2, n, g1.Token)
	mustWaitSlot(t, b, w3, n)
	mustHolders(t, b, k, n, g1, g2)
	release(t, b, g1)
	g3 := pickUpSlot(t, b, w3, n, g2.Token)
	mustHolders(t, b, k, n, g2, g3)
	release(t, b, g2)
	release(t, b, g3)
	mustSlot(t, b, k, "later", n, time.Minute)
}

// pickUpSlot acquires as w's attempt again and checks that it holds a slot
// with a token above after's, for the full TTL.
func pickUpSlot(t *testing.T, b backend.Backend, w held, n int, after uint64) held {
	t.Helper()
	g := slotAs(t, b, w.key, w.owner, w.attempt, n, time.Minute, longQueue())
	if !g.Acquired || g.Token <= after {
		t.Fatalf("%s's pickup = %+v, want a grant with a token above %d", w.owner, g.Grant, after)
	}
	if !nearNow(g.ExpiresAt, time.Minute) {
		t.Errorf("pickup: ExpiresAt %v, want the full TTL from now", g.ExpiresAt)
	}
	return g
}

func mustWaitSlot(t *testing.T, b backend.Backend, w held, n int) {
	t.Helper()
	if g := slotAs(t, b, w.key, w.owner, w.attempt, n, time.Minute, longQueue()); g.Acquired {
		t.Fatalf("%s got %+v out of turn", w.owner, g.Grant)
	}
}

// An acquire under another limit than the live holdings' is refused with
// HeldLimit, queued nowhere, and changes nothing; an exclusive holding's
// limit is 1. Once the holdings are gone, the next grant sets the limit.
func (s *suite) lMismatch(t *testing.T) {
	const n = 2
	b, k := s.limitBackend(t, n, false), uniq(t)
	g1 := mustSlot(t, b, k, "o1", n, time.Minute)
	q := backend.QueueRequest{}
	if b.Info().Queue {
		q = longQueue()
	}
	for _, other := range []int{0, 1, 3} {
		r := slotAs(t, b, k, "o2", newAttempt(), other, time.Minute, q)
		if r.Acquired || r.HeldLimit != n || r.Queued {
			t.Errorf("limit %d on a key held with limit %d = %+v, want a refusal with HeldLimit %d, not queued", other, n, r.Grant, n)
		}
	}
	mustHolders(t, b, k, n, g1)
	g2 := mustSlot(t, b, k, "o3", n, time.Minute) // the slot left is still free: nothing was queued
	release(t, b, g1)
	release(t, b, g2)

	ex := mustGrant(t, b, k, "o4", time.Minute)
	if r := slotAs(t, b, k, "o5", newAttempt(), n, time.Minute, q); r.Acquired || r.HeldLimit != 1 || r.Queued {
		t.Errorf("limit %d on an exclusively held key = %+v, want a refusal with HeldLimit 1, not queued", n, r.Grant)
	}
	mustHolders(t, b, k, 1, ex)
	release(t, b, ex)
	mustSlot(t, b, k, "o6", 3, time.Minute)
}

// A holding that expires frees its slot, one: the next attempt gets it, the
// one after is refused.
func (s *suite) lExpiry(t *testing.T) {
	const n = 2
	b, k := s.limitBackend(t, n, false), uniq(t)
	short := mustSlot(t, b, k, "o1", n, s.short)
	long := mustSlot(t, b, k, "o2", n, time.Minute)
	var g held
	s.eventually(t, "the short holding's slot to free", func() bool {
		g = slotAs(t, b, k, "o3", newAttempt(), n, time.Minute, backend.QueueRequest{})
		return g.Acquired
	})
	if g.Token <= long.Token || g.Token <= short.Token {
		t.Errorf("token %d after %d and %d", g.Token, short.Token, long.Token)
	}
	mustBeBusyBy(t, slotAs(t, b, k, "o4", newAttempt(), n, time.Minute, backend.QueueRequest{}), long, time.Minute)
	mustHolders(t, b, k, n, long, g)
}

// When slots free by expiry, the first queued waiters have them for their
// pickup window: a newcomer gets only a slot no waiter is ahead for.
func (s *suite) lHeadsTurn(t *testing.T) {
	const n = 2
	b, k := s.limitBackend(t, n, true), uniq(t)
	// w1 must queue before the holdings expire: a TTL the next calls come
	// within on a loaded machine.
	mustSlot(t, b, k, "o1", n, s.short)
	o2 := mustSlot(t, b, k, "o2", n, s.short)
	w1 := queueSlot(t, b, k, "w1", n, longQueue())
	// Both slots free by expiry; w1 is ahead for one of them only (handed
	// it by the newcomer's acquire that finds o1's slot free while o2's
	// holding lives, when the two expire apart).
	var first held
	s.eventually(t, "the expired slots to free", func() bool {
		first = slotAs(t, b, k, "newcomer1", newAttempt(), n, time.Minute, backend.QueueRequest{})
		return first.Acquired
	})
	if r := slotAs(t, b, k, "newcomer2", newAttempt(), n, time.Minute, backend.QueueRequest{}); r.Acquired {
		t.Fatalf("a second newcomer got %+v: the last slot is w1's", r.Grant)
	}
	g := pickUpSlot(t, b, w1, n, o2.Token)
	if g.Token == first.Token {
		t.Fatalf("w1 and newcomer1 both got token %d", g.Token)
	}
	if g.Token < first.Token {
		mustHolders(t, b, k, n, g, first)
	} else {
		mustHolders(t, b, k, n, first, g)
	}
}

// A waiter handed a slot that never picks it up loses it at the end of its
// pickup window; the next waiter then takes it.
func (s *suite) lDeadWaiter(t *testing.T) {
	const n = 2
	b, k := s.limitBackend(t, n, true), uniq(t)
	a1 := mustSlot(t, b, k, "a1", n, time.Minute)
	a2 := mustSlot(t, b, k, "a2", n, time.Minute)
	dead := queueSlot(t, b, k, "dead", n, backend.QueueRequest{EntryTTL: time.Minute, Pickup: s.tiny})
	w := queueSlot(t, b, k, "w", n, longQueue())
	release(t, b, a1) // to the dead waiter, for its tiny window
	var g held
	s.eventually(t, "the dead waiter's window to pass", func() bool {
		g = slotAs(t, b, k, w.owner, w.attempt, n, time.Minute, longQueue())
		return g.Acquired
	})
	if g.Token <= a2.Token {
		t.Errorf("token %d after %d", g.Token, a2.Token)
	}
	mustHolders(t, b, k, n, a2, g)
	if hs := holders(t, b, k); len(hs) == n && (hs[0].Owner == dead.owner || hs[1].Owner == dead.owner) {
		t.Errorf("the dead waiter still holds a slot: %+v", hs)
	}
}

// Revoke ends one holding and hands its slot to the head waiter, as a
// release does; the holder's next renewal is rejected.
func (s *suite) lRevoke(t *testing.T) {
	const n = 2
	b, k := s.limitBackend(t, n, true), uniq(t)
	a1 := mustSlot(t, b, k, "a1", n, time.Minute)
	a2 := mustSlot(t, b, k, "a2", n, time.Minute)
	w := queueSlot(t, b, k, "w", n, longQueue())
	h, removed, err := b.Revoke(ctxT(t), k, a1.Token)
	if err != nil || !removed || h.Token != a1.Token {
		t.Fatalf("Revoke(token %d) = %+v, %v, %v", a1.Token, h, removed, err)
	}
	if _, err := b.Renew(ctxT(t), a1.renewReq(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("the revoked holding's Renew: %v, want ErrNotHeld", err)
	}
	g := pickUpSlot(t, b, w, n, a2.Token)
	mustHolders(t, b, k, n, a2, g)
}

// A queued waiter that never comes back for a slot freed by expiry (handed
// it by the next acquire, the name having another holding) keeps it for
// its pickup window only: the next waiter is granted then, and not before.
func (s *suite) lDeadHeadsTurn(t *testing.T) {
	const n = 2
	b, k := s.limitBackend(t, n, true), uniq(t)
	long := mustSlot(t, b, k, "long", n, time.Minute)
	mustSlot(t, b, k, "short", n, s.short) // the waiters queue before it expires
	queueSlot(t, b, k, "dead", n, backend.QueueRequest{EntryTTL: queueLong, Pickup: s.tiny})
	next := queueSlot(t, b, k, "next", n, longQueue())
	var g held
	s.eventually(t, "the short holding to expire and the dead head's turn to pass", func() bool {
		g = slotAs(t, b, k, next.owner, next.attempt, n, time.Minute, longQueue())
		if !g.Acquired && (g.Holder == "" || g.Holder == "dead") && g.HolderExpiresIn > s.tiny {
			t.Fatalf("refused by %q for %v, longer than the dead head's window %v", g.Holder, g.HolderExpiresIn, s.tiny)
		}
		return g.Acquired
	})
	mustHolders(t, b, k, n, long, g)
}

// Slots freed by expiry go to the queued heads at the next acquire, as a
// release hands on its slot, while another slot is handed on from release
// to head: on a busy name the heads are handed that slot before their own
// polls come, so a free slot that waited for a head's poll could stay
// unused for good.
func (s *suite) lFreedToHeads(t *testing.T) {
	const n = 3
	b, k := s.limitBackend(t, n, true), uniq(t)
	a := mustSlot(t, b, k, "a", n, time.Minute)
	// The waiters must queue before these expire: a TTL the next calls come
	// within on a loaded machine.
	q := longQueue()
	var notices <-chan backend.HandOff
	if b.Info().HandOffNotices {
		q.Notify, q.Poll = newAttempt(), 1
		notices = s.watchHandOffs(t, b, q.Notify)
	}
	mustSlot(t, b, k, "x1", n, s.short)
	mustSlot(t, b, k, "x2", n, s.short)
	w := make([]held, 4)
	for i := range w {
		w[i] = queueSlot(t, b, k, fmt.Sprintf("w%d", i+1), n, q)
	}
	s.eventually(t, "the short holdings to expire", func() bool { return len(holders(t, b, k)) == 1 })

	release(t, b, a) // one release, one hand-off: to w1, and no more
	mustOwners(t, b, k, "w1")
	// A newcomer finds two slots free, with w2 and w3 ahead of it: they are
	// handed them, and it is refused as by full slots.
	late := slotAs(t, b, k, "late", newAttempt(), n, time.Minute, longQueue())
	if late.Acquired || late.Holder == "" || !late.Queued {
		t.Fatalf("a newcomer behind the heads of two free slots = %+v, want a refusal naming a holder, queued", late.Grant)
	}
	hs := mustOwners(t, b, k, "w1", "w2", "w3")
	for _, h := range hs[1:] {
		if h.ExpiresIn > queueLong {
			t.Errorf("%s's hand-off ends in %v, after its pickup window %v", h.Owner, h.ExpiresIn, queueLong)
		}
	}
	if notices != nil {
		// One notice per hand-off: w1's by the release, then w2's and w3's.
		for i, want := range hs {
			select {
			case h := <-notices:
				if h.Key != k || h.Owner != want.Owner || h.Attempt != w[i].attempt || h.Token != want.Token || h.Poll != 1 {
					t.Errorf("notice %+v, want key %q, owner %s, attempt %s, token %d, poll 1", h, k, want.Owner, w[i].attempt, want.Token)
				}
			case <-time.After(s.patience):
				t.Fatalf("no hand-off notice to %s", want.Owner)
			}
		}
	}
	g2 := pickUpSlot(t, b, w[1], n, hs[0].Token)
	if g2.Token != hs[1].Token {
		t.Errorf("w2's pickup: token %d, want its hand-off's %d", g2.Token, hs[1].Token)
	}
	// The slot handed to w1 goes on to w4 at w1's release.
	w1 := held{Grant: backend.Grant{Acquired: true, Token: hs[0].Token}, key: k, owner: "w1", attempt: w[0].attempt}
	release(t, b, w1)
	mustOwners(t, b, k, "w2", "w3", "w4")
}

// mustOwners checks that key's live holdings are, in token order, those of
// owners, and returns them.
func mustOwners(t *testing.T, b backend.Backend, key string, owners ...string) []backend.Holder {
	t.Helper()
	hs := holders(t, b, key)
	got := make([]string, len(hs))
	for i, h := range hs {
		got[i] = h.Owner
	}
	if fmt.Sprint(got) != fmt.Sprint(owners) {
		t.Fatalf("Holders(%q) are those of %v, want %v", key, got, owners)
	}
	return hs
}

// watchHandOffs delivers the hand-off notices to addr until the test ends,
// from when the watch says it is ready.
func (s *suite) watchHandOffs(t *testing.T, b backend.Backend, addr string) <-chan backend.HandOff {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan backend.HandOff, 16)
	ready := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- b.WatchHandOffs(ctx, addr, func(h backend.HandOff) {
			select {
			case got <- h:
			case <-ctx.Done():
			}
		}, func() {
			select {
			case ready <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case <-time.After(s.patience):
		t.Fatal("the hand-off watch never said it was ready")
	}
	return got
}
