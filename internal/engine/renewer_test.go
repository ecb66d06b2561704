package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/clock/clocktest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
)

// sink collects what a renewer sends.
func sink(t *testing.T, size int) (*renewer, <-chan []sentRenewal) {
	t.Helper()
	got := make(chan []sentRenewal, 100)
	r := newRenewer(clock.System{}, size, time.Hour, func(b []sentRenewal) { got <- b }, nil, nil)
	t.Cleanup(r.stop)
	return r, got
}

func newRenewal(seq uint64) *renewal {
	return &renewal{pos: -1, Call: renewCall{Seq: seq}, Holding: &lease.Holding{}}
}

// Renewals that may go early go with the one that is due, in batches of at
// most size; none goes before its early bound.
func TestRenewerBatchesWhatMayGoEarly(t *testing.T) {
	r, got := sink(t, 2)
	now := time.Now()
	a, b, c := newRenewal(1), newRenewal(2), newRenewal(3)
	r.schedule(c, now.Add(time.Hour), time.Hour)   // may go at once, but is not due
	r.schedule(b, now.Add(time.Hour), 2*time.Hour) // may go at once too
	r.schedule(a, now.Add(20*time.Millisecond), 0) // due first: its firing takes them all
	first, second := <-got, <-got                  // posted from goroutines of their own: in either order
	if len(first) < len(second) {
		first, second = second, first
	}
	if len(first) != 2 || len(second) != 1 {
		t.Fatalf("batches of %d and %d, want 2 and 1 (size 2)", len(first), len(second))
	}
	if first[0].Seq != 1 {
		t.Errorf("the due renewal went as %d, want first in the first batch", first[0].Seq)
	}
	// Their early bounds: due less slack, the slack capped at the window.
	early := map[*renewal]time.Time{a: now.Add(20 * time.Millisecond), b: now, c: now}
	for _, n := range []*renewal{a, b, c} {
		sent := r.sentAt(n)
		if sent.IsZero() || sent.Before(early[n]) {
			t.Errorf("renewal %d sent at %v, before %v", n.Call.Seq, sent, early[n])
		}
	}
}

// A renewal that may not go early waits for its time, even when another goes.
func TestRenewerKeepsWhatMayNotGoEarly(t *testing.T) {
	r, got := sink(t, 10)
	a, b := newRenewal(1), newRenewal(2)
	r.schedule(b, time.Now().Add(time.Hour), 0)
	r.schedule(a, time.Now(), 0)
	if batch := <-got; len(batch) != 1 || batch[0].Seq != 1 {
		t.Fatalf("sent %v, want renewal 1 alone", batch)
	}
	if sent, wasSent := r.cancel(b); wasSent || !sent.IsZero() {
		t.Errorf("renewal 2 was sent an hour early (at %v)", sent)
	}
}

// cancel takes back a scheduled renewal (it is never sent), and reports one
// already sent with its time.
func TestRenewerCancel(t *testing.T) {
	r, got := sink(t, 10)
	a, b := newRenewal(1), newRenewal(2)
	r.schedule(a, time.Now().Add(time.Hour), 0)
	if _, wasSent := r.cancel(a); wasSent {
		t.Fatal("a renewal taken back before its time counts as sent")
	}
	r.schedule(b, time.Now(), 0)
	if batch := <-got; len(batch) != 1 || batch[0].Seq != 2 {
		t.Fatalf("sent %v, want renewal 2 alone (1 was taken back)", batch)
	}
	sent, wasSent := r.cancel(b)
	if !wasSent || sent.IsZero() {
		t.Errorf("cancel after the send = %v, %v; want its send time, true", sent, wasSent)
	}
	// Rescheduled, it goes again.
	r.schedule(a, time.Now(), 0)
	if batch := <-got; len(batch) != 1 || batch[0].Seq != 1 {
		t.Fatalf("sent %v, want renewal 1", batch)
	}
}

// Renewals scheduled and taken back in a loop (leases acquired and released
// before their first renewal) leave nothing behind, in one slot or in many
// (a long renewal period spreads them over many).
func TestRenewerChurnLeavesNothing(t *testing.T) {
	r, got := sink(t, 10)
	n := newRenewal(1)
	start := time.Now().Add(time.Hour)
	for i := range 10000 {
		r.schedule(n, start.Add(time.Duration(i%2)*time.Duration(i)*slotWidth), 0)
		r.cancel(n)
	}
	r.mu.Lock()
	buckets, slots := len(r.buckets), len(r.slots)
	r.mu.Unlock()
	if buckets != 0 || slots > 64 {
		t.Errorf("after 10,000 rounds of schedule and cancel: %d buckets, %d slots; want 0 and at most 64", buckets, slots)
	}
	// The slots left behind are skipped; a renewal due now still goes, and
	// so does one scheduled into a slot that was emptied before.
	m := newRenewal(2)
	r.schedule(m, time.Now(), 0)
	if batch := <-got; len(batch) != 1 || batch[0].Seq != 2 {
		t.Fatalf("sent %v, want renewal 2 alone", batch)
	}
}

// With batches of one there is no round trip to share: nothing goes early.
func TestRenewerWithBatchesOfOneSendsNothingEarly(t *testing.T) {
	r, got := sink(t, 1)
	a, b := newRenewal(1), newRenewal(2)
	r.schedule(b, time.Now().Add(time.Hour), time.Hour)
	r.schedule(a, time.Now(), 0)
	if batch := <-got; len(batch) != 1 || batch[0].Seq != 1 {
		t.Fatalf("sent %v, want renewal 1 alone", batch)
	}
	if sent, wasSent := r.cancel(b); wasSent {
		t.Errorf("renewal 2 went at %v, an hour early, with batches of one", sent)
	}
}

// A renewal that needs a new slot just when stale slots have piled up (64 or
// more leases taken and released before their first renewal, each in a slot
// of its own) is still sent: the compaction that the new slot sets off keeps
// it. (It used to rebuild the slots from the buckets before the new bucket
// was stored, so the renewal was never sent and its lease expired.)
func TestRenewerSendsTheRenewalThatSetsOffACompaction(t *testing.T) {
	r, got := sink(t, 10)
	n := newRenewal(1)
	later := time.Now().Add(time.Hour)
	for i := range 200 {
		r.schedule(n, later.Add(time.Duration(i)*slotWidth), 0)
		r.cancel(n)
	}
	for i := range 200 { // whichever count of stale slots sets it off
		m := newRenewal(uint64(2 + i))
		r.schedule(m, time.Now(), 0)
		select {
		case batch := <-got:
			if len(batch) != 1 || batch[0].Seq != m.Call.Seq {
				t.Fatalf("sent %v, want renewal %d alone", batch, m.Call.Seq)
			}
		case <-time.After(10 * time.Second): // it goes within a slot when it is kept
			t.Fatalf("renewal %d (after %d stale slots and %d renewals sent) was never sent", m.Call.Seq, 200, i)
		}
		for j := range 3 { // more stale slots before the next one
			r.schedule(n, later.Add(time.Duration(1000+3*i+j)*slotWidth), 0)
			r.cancel(n)
		}
	}
}

// The renewer writes a confirmed automatic renewal to its holding and
// schedules the next, with no message to the lease actor; every other answer
// (a refusal, one to a renewal the actor took back, one after the holding's
// deadline) goes to the actor, as a BackendResult with the renewal's seq.
func TestRenewerConfirmsItselfAndForwardsTheRest(t *testing.T) {
	clock := clocktest.New()
	var sent []sentRenewal
	var replies []protocol.BackendResult
	r := newRenewer(clock, 10, time.Millisecond, func(b []sentRenewal) { sent = b },
		func(_ *entry, res *protocol.BackendResult) { replies = append(replies, *res) }, nil)
	t.Cleanup(r.stop)
	const ttl, every = 3 * time.Second, time.Second
	h := lease.NewHolding("a", "a", "me", "x", "", 7, time.Time{}, clock.Now)
	h.Confirm(LocalDeadline(clock.Now(), ttl), clock.Now(), ttl, every)
	n := &renewal{pos: -1, Holding: h, Auto: true, Every: every,
		Call: renewCall{Seq: 1, TTL: ttl, Deadline: h.Deadline()}}
	fire := func() {
		t.Helper()
		sent = nil
		for range 3 { // a slot's start, then the renewal's due time
			if _, ok := clock.FireAt(); !ok || sent != nil {
				break
			}
			r.fire()
		}
		if len(sent) != 1 || sent[0].Seq != 1 {
			t.Fatalf("sent %v, want renewal 1", sent)
		}
	}
	ok := []backend.RenewResult{{Grant: backend.Grant{Token: 7, ExpiresAt: clock.Now().Add(time.Hour)}}}

	r.schedule(n, clock.Now().Add(every), 0)
	fire()
	at := clock.Now()
	r.answer(sent, ok, nil)
	if len(replies) != 0 {
		t.Fatalf("a confirmation went to the lease actor: %v", replies)
	}
	if got, want := h.Deadline(), LocalDeadline(at, ttl); !got.Equal(want) {
		t.Errorf("deadline %v after the confirmation, want %v", got, want)
	}
	if !h.ExpiresAt().Equal(ok[0].Grant.ExpiresAt) {
		t.Errorf("expiry %v, want the store's %v", h.ExpiresAt(), ok[0].Grant.ExpiresAt)
	}
	if n.state != renewalScheduled || n.at.After(at.Add(every)) || n.at.Before(at.Add(every-every/10)) {
		t.Errorf("next renewal: state %v due %v after the confirmation; want scheduled within a period", n.state, n.at.Sub(at))
	}

	// A refusal goes to the actor, and the renewal is its own from then on.
	fire()
	r.answer(sent, []backend.RenewResult{{Err: backend.ErrNotHeld}}, nil)
	if len(replies) != 1 || replies[0].Seq != 1 || !errors.Is(replies[0].Err, backend.ErrNotHeld) {
		t.Fatalf("replies %v, want renewal 1 refused", replies)
	}
	if _, wasSent := r.cancel(n); !wasSent {
		t.Error("cancel after a forwarded answer says the renewal was not sent: the actor would not await it")
	}

	// An answer to a renewal the actor took back goes to the actor.
	replies = nil
	r.schedule(n, clock.Now().Add(every), 0)
	fire()
	if _, wasSent := r.cancel(n); !wasSent {
		t.Fatal("cancel of a sent renewal says it was not sent")
	}
	before := h.Deadline()
	r.answer(sent, ok, nil)
	if len(replies) != 1 || replies[0].Err != nil {
		t.Fatalf("replies %v, want the confirmation of the renewal taken back", replies)
	}
	if !h.Deadline().Equal(before) {
		t.Error("the renewer wrote a confirmation of a renewal the actor took back")
	}

	// A confirmation after the deadline renews nothing: the holding is lost.
	replies = nil
	r.schedule(n, clock.Now().Add(every), 0)
	fire()
	clock.Set(h.Deadline())
	r.answer(sent, ok, nil)
	if len(replies) != 1 {
		t.Fatalf("replies %v, want the late confirmation forwarded", replies)
	}
	if err := h.Err(); !errors.Is(err, lease.ErrLost) {
		t.Errorf("holding after a confirmation past its deadline: %v, want lost", err)
	}
}
