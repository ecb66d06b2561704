package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/engine"
	"github.com/leasehold/leasehold/messages"
)

// The hand-off (design and model check in model/HANDOFF.md). On a
// store that keeps a waiter queue (backend/queue.go), the head waiter's
// attempt waits in the store's queue, in order of arrival across every
// Manager. A release hands the key to the first attempt in that queue in the
// same atomic step, and the store sends that attempt's Manager a HandOff;
// the waiter holds the key from that notice, without another round trip, and
// renews it to its TTL within the pickup window. A waiter that leaves
// (cancel, wait timeout, Close) takes its attempt out of the queue with the
// clean-up release Release(attempt, 0), which also releases a hand-off it
// may have been given meanwhile. Within one Manager, waiters keep their FIFO
// order: only the head has an attempt in the store's queue.

// queueRequest is w's QueueRequest for its next acquire.
func (a *leaseActor) queueRequest(w *waiter) backend.QueueRequest {
	pickup := a.cfg.PickupWindow(w.m.TTL)
	w.polls++
	q := backend.QueueRequest{EntryTTL: engine.EntryTTL(pickup), Pickup: pickup, Poll: w.polls}
	if a.cfg.HandOffNotices() {
		// Also before the watch is in place (the Manager just started):
		// a notice sent once it is arrives; one sent before is lost, and
		// the waiter's poll, within the window, picks the name up.
		q.Notify = a.cfg.Address()
	}
	return q
}

// onHandOff handles the store's notice that it handed the key to attempt
// h.Attempt of this Manager.
func (a *leaseActor) onHandOff(ctx actor.Context, h backend.HandOff) {
	if len(a.waiters) > 0 && a.waiters[0].attempt == h.Attempt {
		w := a.waiters[0]
		w.handNoticed = true
		if a.state != polling {
			// Its acquire in flight (or the one it makes next, once a
			// release in flight is answered) picks the hand-off up: the
			// same attempt's holding is refreshed. One refused meanwhile
			// is retried at once.
			a.acq.noticed = true
			return
		}
		if h.Poll < w.polls {
			// Made before the store handled the last poll, which was
			// refused: the hand-off had already been taken back.
			return
		}
		pickup := a.cfg.PickupWindow(w.m.TTL)
		// The store handed the key on after it handled the poll of number
		// h.Poll, so after that poll was sent: the hand-off lasts at least
		// until then plus the pickup window.
		if deadline := engine.LocalDeadline(w.pollSent, pickup); w.queued && deadline.Sub(a.now) > pickup/4 {
			a.takeHandOff(ctx, w, h, deadline, pickup)
			return
		}
		a.wake() // too little of the window left to use: pick it up by acquiring
	}
	// Any other notice is stale: its hand-off was picked up by an acquire
	// already, or made to a waiter that left, whose clean-up release
	// (Release(attempt, 0)) releases it too.
}

// takeHandOff makes the hand-off h the head waiter w's holding (state
// polling), its local deadline the end of the pickup window as seen from
// here.
func (a *leaseActor) takeHandOff(ctx actor.Context, w *waiter, h backend.HandOff, deadline time.Time, pickup time.Duration) {
	a.removeAt(0) // state idle
	m := w.m
	tok := h.Token
	fenced := tok <= a.maxToken
	a.maxToken = max(a.maxToken, tok)
	a.answerObservers(messages.AcquireReply{Err: messages.ErrNotAcquired, Holder: a.cfg.Owner, HeldHere: true})
	switch {
	case fenced:
		a.releaseThenReply(ctx, w.attempt, tok, pickup, m, fmt.Errorf("%w: acquire %q: the backend handed over token %d, not above token %d seen before for this name", messages.ErrTokenNotIncreasing, m.Name, tok, a.maxToken))
	case !m.Ticket.Claim():
		a.startRelease(ctx, w.attempt, tok, pickup, nil) // the caller gave up meanwhile
	default:
		a.cfg.Metrics.HandedOff(true)
		// ExpiresAt is for display, on the store's clock: the end of the
		// window as this host sees it is the best it can say until the
		// pickup renewal answers.
		a.hold(m, w.attempt, backend.Grant{Acquired: true, Token: tok, ExpiresAt: a.now.Add(pickup)}, deadline, true)
	}
}

// leave takes w, a waiter that no longer waits, out of the store's queue, if
// it was in it: the clean-up release of its attempt, sent (and resent until
// confirmed) like an unconfirmed release, before anything else on this key.
// It returns w.
func (a *leaseActor) leave(w *waiter) *waiter {
	if !w.queued {
		return w
	}
	w.queued = false
	ttl := engine.EntryTTL(a.cfg.PickupWindow(w.m.TTL)) // past it, entry and hand-off are gone anyway
	a.unconfirmed = append(a.unconfirmed, &pendingRelease{attempt: w.attempt, ttl: ttl, until: a.cfg.Time().Now().Add(ttl)})
	a.unconfDue = true
	return w
}
