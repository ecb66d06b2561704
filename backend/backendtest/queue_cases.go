package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// queueCases check the waiter queue and the hand-off (backend/queue.go) on a
// store whose Info says Queue; they are skipped on others.
func (s *suite) queueCases() []testCase {
	return []testCase{
		{"RefusedWaitersQueueInOrder", s.qOrder},
		{"NoQueueWithoutWaitOrQueueRequest", s.qNoQueue},
		{"AQueuedAttemptKeepsItsPlace", s.qKeepsPlace},
		{"LeavingTheQueue", s.qLeave},
		{"ExpiredEntriesAreSkipped", s.qExpiredEntry},
		{"UnclaimedHandOffIsTakenBack", s.qPickupTimeout},
		{"HeadHasTheTurnAfterAnExpiry", s.qHeadsTurn},
		{"DeadHeadsTurnPasses", s.qDeadHeadsTurn},
		{"HandOffNotice", s.qNotice},
		{"FullQueueEnqueuesNothing", s.qFull},
		{"RevokeHandsOn", s.qRevoke},
	}
}

// A long pickup window and entry TTL, for cases that do not wait for them.
const queueLong = time.Minute

func (s *suite) queueBackend(t *testing.T) backend.Backend {
	t.Helper()
	b := s.newBackend(t)
	if !b.Info().Queue {
		t.Skipf("%s keeps no waiter queue (waiters poll)", b.Info().Name)
	}
	return b
}

// waitAs makes a waiting, queueing acquire as attempt.
func waitAs(t *testing.T, b backend.Backend, key, owner, attempt string, q backend.QueueRequest) held {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: time.Minute, Wait: true, Queue: q})
	if err != nil {
		t.Fatalf("queued Acquire(%q, %q, %q): %v", key, owner, attempt, err)
	}
	return held{Grant: g, key: key, owner: owner, attempt: attempt}
}

func longQueue() backend.QueueRequest {
	return backend.QueueRequest{EntryTTL: queueLong, Pickup: queueLong}
}

// enqueue makes a new attempt wait for key and checks that it was queued.
func enqueue(t *testing.T, b backend.Backend, key, owner string, q backend.QueueRequest) held {
	t.Helper()
	w := waitAs(t, b, key, owner, newAttempt(), q)
	if w.Acquired || !w.Queued {
		t.Fatalf("%s's waiting Acquire = %+v, want a refusal with Queued", owner, w.Grant)
	}
	return w
}

func release(t *testing.T, b backend.Backend, h held) {
	t.Helper()
	if err := b.Release(ctxT(t), h.releaseReq()); err != nil {
		t.Fatalf("Release(%s): %v", h.owner, err)
	}
}

// pickUp acquires as w's attempt again and checks that it holds the key
// with a token above after's.
func pickUp(t *testing.T, b backend.Backend, w held, after uint64) held {
	t.Helper()
	g := waitAs(t, b, w.key, w.owner, w.attempt, longQueue())
	if !g.Acquired || g.Token <= after {
		t.Fatalf("%s's pickup = %+v, want a grant with a token above %d", w.owner, g.Grant, after)
	}
	if !nearNow(g.ExpiresAt, time.Minute) {
		t.Errorf("pickup: ExpiresAt %v, want the full TTL from now", g.ExpiresAt)
	}
	return g
}

// mustWait checks that a queued attempt is still refused.
func mustWait(t *testing.T, b backend.Backend, w held) {
	t.Helper()
	if g := waitAs(t, b, w.key, w.owner, w.attempt, longQueue()); g.Acquired {
		t.Fatalf("%s got %+v out of turn", w.owner, g.Grant)
	}
}

// A release hands the key to the first waiter; every other waiter stays
// refused, a newcomer included, until the key goes round in arrival order.
func (s *suite) qOrder(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", time.Minute)
	w1 := enqueue(t, b, k, "w1", longQueue())
	w2 := enqueue(t, b, k, "w2", longQueue())
	w3 := enqueue(t, b, k, "w3", longQueue())
	mustBeBusyBy(t, w1, a, time.Minute)

	release(t, b, a)
	if n := acquire(t, b, k, "newcomer", time.Minute); n.Acquired || n.Holder != "w1" {
		t.Fatalf("a newcomer after the release got %+v, want a refusal naming w1 (the hand-off)", n.Grant)
	}
	mustWait(t, b, w2)
	mustWait(t, b, w3)
	g1 := pickUp(t, b, w1, a.Token)
	release(t, b, g1)
	g2 := pickUp(t, b, w2, g1.Token)
	mustWait(t, b, w3)
	release(t, b, g2)
	g3 := pickUp(t, b, w3, g2.Token)
	release(t, b, g3)
	// The queue is empty: the key is free for anyone.
	mustGrant(t, b, k, "later", time.Minute)
}

// Without Wait, or without a QueueRequest, a refused attempt is not queued.
func (s *suite) qNoQueue(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", time.Minute)
	if g := acquire(t, b, k, "once", time.Minute); g.Acquired || g.Queued {
		t.Errorf("a one-attempt Acquire = %+v, want a refusal, not queued", g.Grant)
	}
	if g := waitAs(t, b, k, "poller", newAttempt(), backend.QueueRequest{}); g.Acquired || g.Queued {
		t.Errorf("a waiting Acquire without QueueRequest = %+v, want a refusal, not queued", g.Grant)
	}
	release(t, b, a)
	mustGrant(t, b, k, "free", time.Minute)
}

// An attempt that asks again keeps its place (and is queued once).
func (s *suite) qKeepsPlace(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", time.Minute)
	w1 := enqueue(t, b, k, "w1", longQueue())
	w2 := enqueue(t, b, k, "w2", longQueue())
	for range 3 {
		if g := waitAs(t, b, k, w1.owner, w1.attempt, longQueue()); g.Acquired || !g.Queued {
			t.Fatalf("w1 asking again = %+v, want a refusal with Queued", g.Grant)
		}
	}
	release(t, b, a)
	mustWait(t, b, w2)
	g1 := pickUp(t, b, w1, a.Token)
	release(t, b, g1)
	g2 := pickUp(t, b, w2, g1.Token)
	release(t, b, g2)
	// w1 was queued once: nothing is handed to it again.
	mustGrant(t, b, k, "later", time.Minute)
}

// Release(attempt, 0) of a queued attempt takes it out of the queue.
func (s *suite) qLeave(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", time.Minute)
	w1 := enqueue(t, b, k, "w1", longQueue())
	w2 := enqueue(t, b, k, "w2", longQueue())
	leave := w1.releaseReq()
	leave.Token = 0
	if err := b.Release(ctxT(t), leave); err != nil {
		t.Fatalf("leaving the queue: %v", err)
	}
	// A repeated leave changes nothing.
	if err := b.Release(ctxT(t), leave); err != nil {
		t.Fatalf("leaving the queue again: %v", err)
	}
	release(t, b, a)
	pickUp(t, b, w2, a.Token)
	if g := acquire(t, b, k, w1.owner, time.Minute); g.Acquired {
		t.Fatalf("the waiter that left got %+v", g.Grant)
	}
}

// An entry its waiter stopped renewing is skipped by the hand-off.
func (s *suite) qExpiredEntry(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", time.Minute)
	gone := enqueue(t, b, k, "gone", backend.QueueRequest{EntryTTL: s.tiny, Pickup: queueLong})
	w := enqueue(t, b, k, "w", longQueue())
	// Entry expiry has no signal: let the store's clock pass it.
	time.Sleep(3 * s.tiny)
	release(t, b, a)
	g := pickUp(t, b, w, a.Token)
	if r := acquire(t, b, k, gone.owner, time.Minute); r.Acquired || r.Holder != "w" {
		t.Errorf("after the skipped entry: %+v, want w to hold", r.Grant)
	}
	release(t, b, g)
}

// A hand-off its waiter does not pick up within the pickup window is taken
// back: the next waiter gets the key, and the late pickup finds nothing.
func (s *suite) qPickupTimeout(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", time.Minute)
	// A window long enough for the next call to come within it on a loaded
	// machine, short enough to wait out.
	dead := enqueue(t, b, k, "dead", backend.QueueRequest{EntryTTL: queueLong, Pickup: s.short})
	w := enqueue(t, b, k, "w", longQueue())
	release(t, b, a)
	r := acquire(t, b, k, "newcomer", time.Minute)
	if r.Acquired || r.Holder != "dead" || r.HolderExpiresIn > s.short {
		t.Fatalf("during the pickup window: %+v, want a refusal naming dead for at most %v", r.Grant, s.short)
	}
	var g held
	s.eventually(t, "the unclaimed hand-off to pass on", func() bool {
		g = waitAs(t, b, k, w.owner, w.attempt, longQueue())
		return g.Acquired
	})
	if g.Token <= a.Token {
		t.Fatalf("token %d after the unclaimed hand-off, want above %d", g.Token, a.Token)
	}
	if g.Token <= r.HolderToken {
		t.Fatalf("token %d after the unclaimed hand-off, want above the hand-off's %d", g.Token, r.HolderToken)
	}
	if _, err := b.Renew(ctxT(t), backend.RenewRequest{Key: k, Owner: dead.owner, Attempt: dead.attempt, Token: r.HolderToken, TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("a late pickup by Renew = %v, want ErrNotHeld", err)
	}
	if r := waitAs(t, b, k, dead.owner, dead.attempt, longQueue()); r.Acquired {
		t.Errorf("a late pickup by Acquire = %+v, want a refusal", r.Grant)
	}
	release(t, b, g)
}

// When the holding expires (no release), the head waiter has the turn for
// its pickup window: the others are refused, the head is granted.
func (s *suite) qHeadsTurn(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	// The waiters must queue before the holding expires: a TTL the next
	// calls come within on a loaded machine.
	a := mustGrant(t, b, k, "a", s.short)
	head := enqueue(t, b, k, "head", longQueue())
	next := enqueue(t, b, k, "next", longQueue())
	time.Sleep(s.short + s.tiny) // let the holding expire: no signal for that
	r := waitAs(t, b, k, next.owner, next.attempt, longQueue())
	if r.Acquired || r.Holder != "" || r.HolderExpiresIn <= 0 || r.HolderExpiresIn > queueLong {
		t.Fatalf("the second waiter during the head's turn: %+v, want a refusal with no holder, the turn's time left", r.Grant)
	}
	if n := acquire(t, b, k, "newcomer", time.Minute); n.Acquired {
		t.Fatalf("a newcomer during the head's turn got %+v", n.Grant)
	}
	g := pickUp(t, b, head, a.Token)
	release(t, b, g)
	pickUp(t, b, next, g.Token)
}

// A head that lets its turn pass (a dead waiter) leaves the queue: after
// the pickup window the next contender is granted.
func (s *suite) qDeadHeadsTurn(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", s.short) // the waiters queue before it expires
	enqueue(t, b, k, "dead", backend.QueueRequest{EntryTTL: queueLong, Pickup: s.tiny})
	next := enqueue(t, b, k, "next", longQueue())
	time.Sleep(s.short + s.tiny) // the holding expires: no signal for that
	if r := waitAs(t, b, k, next.owner, next.attempt, longQueue()); r.Acquired {
		t.Fatalf("the turn starts when a contender finds the key free: got %+v", r.Grant)
	}
	var g held
	s.eventually(t, "the dead head's turn to pass", func() bool {
		g = waitAs(t, b, k, next.owner, next.attempt, longQueue())
		return g.Acquired
	})
	if g.Token <= a.Token {
		t.Fatalf("token %d, want above %d", g.Token, a.Token)
	}
	release(t, b, g)
	// The dead head left the queue with its turn: nothing is handed to it.
	mustGrant(t, b, k, "later", time.Minute)
}

// The hand-off is announced to the waiter's address with its token and the
// number of its latest poll; Renew with that token picks it up.
func (s *suite) qNotice(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	if !b.Info().HandOffNotices {
		t.Skipf("%s sends no hand-off notices (waiters poll)", b.Info().Name)
	}
	addr := newAttempt()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan backend.HandOff, 16)
	ready := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- b.WatchHandOffs(ctx, addr, func(h backend.HandOff) { got <- h }, func() { ready <- struct{}{} })
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-ready:
	case <-time.After(s.patience):
		t.Fatal("the hand-off watch never said it was ready")
	}
	// Another address's hand-off is not delivered here.
	o := mustGrant(t, b, k+"other", "a", time.Minute)
	enqueue(t, b, k+"other", "w", backend.QueueRequest{EntryTTL: queueLong, Pickup: queueLong, Notify: newAttempt()})
	release(t, b, o)

	a := mustGrant(t, b, k, "a", time.Minute)
	q := backend.QueueRequest{EntryTTL: queueLong, Pickup: queueLong, Notify: addr, Poll: 1}
	wt := enqueue(t, b, k, "w", q)
	q.Poll = 2
	waitAs(t, b, k, wt.owner, wt.attempt, q)
	release(t, b, a)
	var h backend.HandOff
	select {
	case h = <-got:
	case <-time.After(s.patience):
		t.Fatal("no hand-off notice")
	}
	if h.Key != k || h.Owner != "w" || h.Attempt != wt.attempt || h.Token <= a.Token || h.Poll != 2 {
		t.Fatalf("notice %+v, want key %q, owner w, attempt %s, a token above %d, poll 2", h, k, wt.attempt, a.Token)
	}
	g, err := b.Renew(ctxT(t), backend.RenewRequest{Key: k, Owner: "w", Attempt: wt.attempt, Token: h.Token, TTL: time.Minute})
	if err != nil || g.Token != h.Token || !nearNow(g.ExpiresAt, time.Minute) {
		t.Fatalf("pickup by Renew = %+v, %v; want token %d for a minute", g, err, h.Token)
	}
	select {
	case h := <-got:
		t.Fatalf("a second notice %+v (the other address's, or a repeat)", h)
	default:
	}
}

// A queue holds at most MaxQueueEntries live entries.
func (s *suite) qFull(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", time.Minute)
	first := enqueue(t, b, k, "w", longQueue())
	for range backend.MaxQueueEntries - 1 {
		enqueue(t, b, k, "w", longQueue())
	}
	if g := waitAs(t, b, k, "late", newAttempt(), longQueue()); g.Acquired || g.Queued {
		t.Fatalf("an attempt beyond the bound = %+v, want a refusal, not queued", g.Grant)
	}
	release(t, b, a)
	pickUp(t, b, first, a.Token)
}

// An operator's Revoke hands the key on as a release does.
func (s *suite) qRevoke(t *testing.T) {
	b, k := s.queueBackend(t), uniq(t)
	a := mustGrant(t, b, k, "a", time.Minute)
	w := enqueue(t, b, k, "w", longQueue())
	if _, removed, err := b.Revoke(ctxT(t), k, 0); err != nil || !removed {
		t.Fatalf("Revoke = %v, %v", removed, err)
	}
	pickUp(t, b, w, a.Token)
}
