package leaseholdtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// limitCases check leases with several holders (WithLimit) through
// Managers. Each row that needs a limit n above 1 runs only on a store whose
// Info.MaxLimit is at least n; the rows about limit 1, bad limits and limits
// the store cannot grant run on every store.
func (s *suite) limitCases() []testCase {
	return []testCase{
		{"LimitOneIsTheExclusiveLease", s.lExclusive},
		{"BadLimitRefusedBeforeAnyCall", s.lBadLimit},
		{"LimitAboveTheBackendsRefusedBeforeAnyCall", s.lUnsupported},
		{"AtMostNHoldersAtAnyInstantTokensIncrease", s.lAtMostN},
		{"EachHoldingIsALease", s.lEachIsALease},
		{"FreedSlotGoesToWaitersInArrivalOrder", s.lFIFO},
		{"OtherLimitRefusedNamingBothChangingNothing", s.lMismatch},
		{"ExpiryFreesOneSlot", s.lExpiry},
		{"DeadWaiterDelaysOthersAtMostItsPickupWindow", s.lDeadWaiter},
	}
}

// limitPair is a pair on a store that grants limit n (and keeps a waiter
// queue, when queue is set), or skips the test.
func (s *suite) limitPair(t *testing.T, n int, queue bool) pair {
	t.Helper()
	p := s.pair(t)
	info := p.raw.Info()
	if info.MaxLimit < n {
		t.Skipf("%s grants at most %d holders per name (Info.MaxLimit); this row needs %d", info.Name, max(info.MaxLimit, 1), n)
	}
	if queue && !info.Queue {
		t.Skipf("%s keeps no waiter queue", info.Name)
	}
	return p
}

func holdersOf(t *testing.T, m *leasehold.Manager, name string) []leasehold.LeaseInfo {
	t.Helper()
	hs, err := m.Holders(ctxT(t), name)
	if err != nil {
		t.Fatalf("Holders(%q): %v", name, err)
	}
	return hs
}

// mustHold checks that name's holders are exactly ls (in token order), each
// with limit n.
func mustHold(t *testing.T, m *leasehold.Manager, name string, n int, ls ...*leasehold.Lease) {
	t.Helper()
	hs := holdersOf(t, m, name)
	if len(hs) != len(ls) {
		t.Fatalf("Holders(%q) = %+v, want %d holdings", name, hs, len(ls))
	}
	for i, l := range ls {
		if hs[i].Token != l.Token() || hs[i].Owner != l.Owner() || hs[i].Limit != n || hs[i].Name != name {
			t.Errorf("Holders(%q)[%d] = %+v, want token %d of %s, limit %d", name, i, hs[i], l.Token(), l.Owner(), n)
		}
	}
}

// WithLimit(1) is the lease without WithLimit: no re-entry, another owner
// refused as before (never a limit disagreement), one holder listed.
func (s *suite) lExclusive(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	l := mustAcquire(t, m1, "job", leasehold.WithLimit(1))
	for _, opts := range [][]leasehold.AcquireOption{nil, {leasehold.WithLimit(1)}} {
		_, err := m2.Acquire(ctxT(t), "job", opts...)
		wantNotAcquired(t, err)
		if errors.Is(err, leasehold.ErrLimitMismatch) {
			t.Errorf("limit 1 against limit 1: %v, want no disagreement", err)
		}
		_, err = m1.Acquire(ctxT(t), "job", opts...)
		wantNotAcquired(t, err) // no re-entry
	}
	if held := m1.Held(); len(held) != 1 || held[0].Limit != 1 || held[0].Token != l.Token() {
		t.Errorf("Held = %+v, want the one lease with limit 1", held)
	}
	mustHold(t, m2, "job", 1, l)
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if hs := holdersOf(t, m2, "job"); len(hs) != 0 {
		t.Errorf("Holders after the release = %+v, want none", hs)
	}
}

// A limit below 1 or above MaxLimit is ErrInvalidOption before any backend
// call.
func (s *suite) lBadLimit(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	for _, n := range []int{0, -1, leasehold.MaxLimit + 1} {
		_, err := m.Acquire(ctxT(t), "job", leasehold.WithLimit(n), leasehold.WithWait(time.Second))
		if !errors.Is(err, leasehold.ErrInvalidOption) || !strings.Contains(fmt.Sprint(err), fmt.Sprint(n)) {
			t.Errorf("WithLimit(%d): %v, want ErrInvalidOption naming %d", n, err, n)
		}
	}
	if n := p.f.Calls(); n != 0 {
		t.Errorf("%d backend calls for refused options, want 0", n)
	}
}

// A limit above the store's Info.MaxLimit is ErrInvalidOption (and
// errors.ErrUnsupported) naming the backend and its limit, before any call.
func (s *suite) lUnsupported(t *testing.T) {
	p := s.pair(t)
	info := p.raw.Info()
	most := max(info.MaxLimit, 1)
	if most >= leasehold.MaxLimit {
		t.Skipf("%s grants every limit up to MaxLimit (%d)", info.Name, leasehold.MaxLimit)
	}
	m := p.manager(t, "o1")
	_, err := m.Acquire(ctxT(t), "job", leasehold.WithLimit(most+1))
	if !errors.Is(err, leasehold.ErrInvalidOption) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("WithLimit(%d) on %s: %v, want ErrInvalidOption wrapping errors.ErrUnsupported", most+1, info.Name, err)
	}
	if msg := err.Error(); !strings.Contains(msg, info.Name) || !strings.Contains(msg, fmt.Sprintf("at most %d", most)) {
		t.Errorf("error %q does not name the backend %q and its limit %d", msg, info.Name, most)
	}
	if n := p.f.Calls(); n != 0 {
		t.Errorf("%d backend calls for a refused limit, want 0", n)
	}
}

// Goroutines of two Managers take turns on a name of limit 2: never more
// than 2 handles are live at once (each counted from its Acquire's return
// until its Release, and live then by its own deadline), and every grant's
// token is above every token released before it was asked for.
func (s *suite) lAtMostN(t *testing.T) {
	const n, workers, rounds = 2, 3, 6
	p := s.limitPair(t, n, false)
	ms := []*leasehold.Manager{p.manager(t, "o1"), p.manager(t, "o2")}
	var (
		live, most atomic.Int64
		mu         sync.Mutex
		released   uint64 // the highest token released so far
		tokens     = map[uint64]bool{}
		wg         sync.WaitGroup
	)
	for _, m := range ms {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					mu.Lock()
					before := released
					mu.Unlock()
					l, err := m.Acquire(ctxT(t), "job", leasehold.WithLimit(n), leasehold.WithWait(leasehold.WaitForever))
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					now := live.Add(1)
					for cur := most.Load(); now > cur && !most.CompareAndSwap(cur, now); cur = most.Load() {
					}
					mu.Lock()
					if tokens[l.Token()] || l.Token() <= before {
						t.Errorf("token %d: issued before, or not above %d released before its Acquire", l.Token(), before)
					}
					tokens[l.Token()] = true
					mu.Unlock()
					if hs := holdersOf(t, m, "job"); len(hs) > n {
						t.Errorf("Holders = %+v, more than %d", hs, n)
					}
					if err := l.Err(); err != nil {
						t.Errorf("a handle ended while counted live: %v", err)
					}
					live.Add(-1)
					mu.Lock()
					released = max(released, l.Token())
					mu.Unlock()
					if err := l.Release(ctxT(t)); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if got := most.Load(); got > n {
		t.Errorf("%d handles live at once, want at most %d", got, n)
	}
	if len(tokens) != len(ms)*workers*rounds {
		t.Errorf("%d distinct tokens for %d grants", len(tokens), len(ms)*workers*rounds)
	}
}

// Each holding is a lease of its own: its own token, renewals, Release and
// loss; a Manager's own Acquires each take a slot, and Held and Holders list
// them all.
func (s *suite) lEachIsALease(t *testing.T) {
	const n = 2
	p := s.limitPair(t, n, false)
	m, other := p.manager(t, "o1"), p.manager(t, "o2")
	sub := m.Subscribe(4)
	l1 := mustAcquire(t, m, "job", leasehold.WithLimit(n), leasehold.WithTTL(time.Minute))
	l2 := mustAcquire(t, m, "job", leasehold.WithLimit(n), leasehold.WithTTL(time.Minute))
	if l2.Token() <= l1.Token() {
		t.Errorf("tokens %d then %d", l1.Token(), l2.Token())
	}
	_, err := other.Acquire(ctxT(t), "job", leasehold.WithLimit(n))
	wantNotAcquired(t, err)
	var na *leasehold.NotAcquiredError
	if !errors.As(err, &na) || na.Limit != n || na.Holder != "o1" {
		t.Errorf("a third holder: %v, want a NotAcquiredError naming limit %d and holder o1", err, n)
	}
	if held := m.Held(); len(held) != 2 || held[0].Token != l1.Token() || held[1].Token != l2.Token() || held[0].Limit != n {
		t.Errorf("Held = %+v, want both holdings, limit %d, by token", held, n)
	}
	mustHold(t, other, "job", n, l1, l2)
	if err := l1.Renew(ctxT(t), 0); err != nil {
		t.Fatalf("Renew of one holding: %v", err)
	}
	// A revoked holding is lost alone.
	if _, removed, err := p.raw.Revoke(ctxT(t), p.prefix+"job", l1.Token()); err != nil || !removed {
		t.Fatalf("Revoke: removed %v, %v", removed, err)
	}
	if err := l1.Renew(ctxT(t), 0); !errors.Is(err, leasehold.ErrLost) {
		t.Errorf("Renew after Revoke = %v, want ErrLost", err)
	}
	lostWithin(t, l1, sub, s.patience, leasehold.ReasonRejected)
	if err := l2.Renew(ctxT(t), 0); err != nil || l2.Err() != nil {
		t.Fatalf("the other holding after one was revoked: Renew %v, Err %v", err, l2.Err())
	}
	// Do and LeaseFrom take the free slot.
	err = other.Do(ctxT(t), "job", func(ctx context.Context) error {
		l, ok := leasehold.LeaseFrom(ctx)
		if !ok || l.Token() <= l2.Token() {
			return fmt.Errorf("LeaseFrom = %v, %v, want a lease with a token above %d", l, ok, l2.Token())
		}
		mustHold(t, m, "job", n, l2, l)
		return nil
	}, leasehold.WithLimit(n))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if err := l2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if hs := holdersOf(t, m, "job"); len(hs) != 0 {
		t.Errorf("Holders after every release = %+v", hs)
	}
}

// Waiters for a full name, from several Managers and from one, are served
// in order of arrival at the store, each freed slot to the next.
func (s *suite) lFIFO(t *testing.T) {
	const n = 2
	p := s.limitPair(t, n, true)
	// Long pickup windows: where the store sends notices, the waiters take
	// the slot from the notice alone, which must reach the actor of each
	// one's own holding. A queued waiter polls no sooner than half its
	// window, so with a minute no poll can take a hand-off first, however
	// slowly the machine runs the test.
	meter, withMeter := newHandOffMeter(t)
	window := leasehold.WithPickupWindow(time.Minute)
	m1, m3 := p.manager(t, "o1"), p.manager(t, "o3", window)
	m2 := p.manager(t, "o2", withMeter, window)
	lim := leasehold.WithLimit(n)
	a1 := mustAcquire(t, m1, "job", lim)
	a2 := mustAcquire(t, m1, "job", lim)
	c1 := waitFor(t, p, ctxT(t), m2, "job", lim)
	c2 := waitFor(t, p, ctxT(t), m3, "job", lim)
	c3 := waitFor(t, p, ctxT(t), m2, "job", lim) // m2's second waiter queues on its own
	if err := a1.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	w1 := s.got(t, c1, "the first waiter")
	notYet(t, c2, "the second waiter")
	notYet(t, c3, "the third waiter")
	if err := a2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	w2 := s.got(t, c2, "the second waiter")
	notYet(t, c3, "the third waiter")
	if err := w1.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	w3 := s.got(t, c3, "the third waiter")
	if !(a2.Token() < w1.Token() && w1.Token() < w2.Token() && w2.Token() < w3.Token()) {
		t.Errorf("tokens %d, %d, %d, %d: want increasing in hand-off order", a2.Token(), w1.Token(), w2.Token(), w3.Token())
	}
	mustHold(t, m1, "job", n, w2, w3)
	if p.raw.Info().HandOffNotices {
		if got := meter.count(t, "notice"); got != 2 {
			t.Errorf("o2's hand-offs by notice = %d, want 2 (both its waiters)", got)
		}
	}
}

// An Acquire under another limit than the name's live holdings' fails at
// once with a LimitMismatchError naming both limits, whatever its wait, and
// changes nothing; the exclusive lease's limit is 1.
func (s *suite) lMismatch(t *testing.T) {
	const n = 2
	p := s.limitPair(t, n, false)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	l := mustAcquire(t, m1, "job", leasehold.WithLimit(n))
	for _, other := range []int{1, 3} {
		start := time.Now()
		_, err := m2.Acquire(ctxT(t), "job", leasehold.WithLimit(other), leasehold.WithWait(time.Minute))
		var mm *leasehold.LimitMismatchError
		if !errors.As(err, &mm) || mm.Limit != other || mm.HeldLimit != n || !errors.Is(err, leasehold.ErrLimitMismatch) {
			t.Fatalf("WithLimit(%d) on a name held with limit %d: %v, want a LimitMismatchError{%d, %d}", other, n, err, other, n)
		}
		if errors.Is(err, leasehold.ErrNotAcquired) {
			t.Errorf("a disagreement is not ErrNotAcquired: %v", err)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("limit %d", other)) || !strings.Contains(msg, fmt.Sprintf("limit %d", n)) {
			t.Errorf("error %q does not name both limits", msg)
		}
		if took := time.Since(start); took > s.patience {
			t.Errorf("the refusal took %v: it must not wait", took)
		}
	}
	mustHold(t, m2, "job", n, l)
	l2 := mustAcquire(t, m2, "job", leasehold.WithLimit(n)) // the other slot is still free
	for _, x := range []*leasehold.Lease{l, l2} {
		if err := x.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	ex := mustAcquire(t, m1, "job")
	_, err := m2.Acquire(ctxT(t), "job", leasehold.WithLimit(n))
	var mm *leasehold.LimitMismatchError
	if !errors.As(err, &mm) || mm.Limit != n || mm.HeldLimit != 1 {
		t.Errorf("WithLimit(%d) on an exclusively held name: %v, want a LimitMismatchError{%d, 1}", n, err, n)
	}
	mustHold(t, m2, "job", 1, ex)
}

// A holding that is not renewed is lost at its deadline and frees its one
// slot: a waiter gets it, a newcomer after it does not.
func (s *suite) lExpiry(t *testing.T) {
	const n = 2
	p := s.limitPair(t, n, false)
	m1, m2, m3 := p.manager(t, "o1"), p.manager(t, "o2"), p.manager(t, "o3")
	sub := m1.Subscribe(4)
	short := mustAcquire(t, m1, "job", leasehold.WithLimit(n), leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	long := mustAcquire(t, m1, "job", leasehold.WithLimit(n), leasehold.WithTTL(time.Minute))
	c := make(chan acquired, 1)
	go func() {
		l, err := m2.Acquire(ctxT(t), "job", leasehold.WithLimit(n), leasehold.WithWait(leasehold.WaitForever))
		c <- acquired{l, err}
	}()
	lostWithin(t, short, sub, s.patience, leasehold.ReasonExpired)
	w := s.got(t, c, "the waiter")
	if w.Token() <= long.Token() {
		t.Errorf("token %d after %d", w.Token(), long.Token())
	}
	if long.Err() != nil {
		t.Errorf("the renewed holding: %v", long.Err())
	}
	_, err := m3.Acquire(ctxT(t), "job", leasehold.WithLimit(n))
	wantNotAcquired(t, err)
	mustHold(t, m3, "job", n, long, w)
}

// A waiter that died in the store's queue is handed a freed slot and never
// picks it up: the next waiter gets the slot once the dead one's pickup
// window has passed.
func (s *suite) lDeadWaiter(t *testing.T) {
	const n = 2
	p := s.limitPair(t, n, true)
	meter, withMeter := newHandOffMeter(t)
	m1 := p.manager(t, "o1")
	m2 := p.manager(t, "o2", withMeter, leasehold.WithPickupWindow(s.short/2))
	a1 := mustAcquire(t, m1, "job", leasehold.WithLimit(n))
	a2 := mustAcquire(t, m1, "job", leasehold.WithLimit(n))
	dead, err := p.raw.Acquire(ctxT(t), backend.AcquireRequest{
		Key: p.prefix + "job", Owner: "dead", Attempt: "dead.1", TTL: time.Minute, Wait: true, Limit: n,
		Queue: backend.QueueRequest{EntryTTL: time.Minute, Pickup: s.tiny, Notify: "nobody"},
	})
	if err != nil || !dead.Queued {
		t.Fatalf("the dead waiter's enqueue: %+v, %v", dead, err)
	}
	c := waitFor(t, p, ctxT(t), m2, "job", leasehold.WithLimit(n))
	start := time.Now()
	if err := a1.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	w := s.got(t, c, "the waiter behind the dead one")
	t.Logf("the waiter got the slot %v after the release (pickup windows: dead %v, its own %v)", time.Since(start), s.tiny, s.short/2)
	if w.Token() <= a2.Token() {
		t.Errorf("token %d after %d", w.Token(), a2.Token())
	}
	// Taken by its own poll once the dead waiter's window had passed: the
	// slot was free then, and its turn was first.
	if got := meter.count(t, "poll"); got != 1 {
		t.Errorf("hand-offs by poll (the fallback) = %d, want 1", got)
	}
	mustHold(t, m1, "job", n, a2, w)
}
