package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/engine"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// waiter is one Acquire in the FIFO queue.
type waiter struct {
	m        *messages.Acquire
	attempt  string    // its acquire attempt's identity, made when it first asks the backend
	deadline time.Time // zero: no deadline of its own
	timer    func()    // stops its wait timeout
	refusals int       // refusals so far, for poll backoff

	// On a Queue store (lease_handoff.go):
	polls    uint64    // acquires sent for its attempt (QueueRequest.Poll of the last)
	pollSent time.Time // when the last refused one was sent
	queued   bool      // the store's last answer: the attempt has a queue entry
	// handNoticed: a hand-off notice for its attempt came (for the
	// leasehold.handoffs metric).
	handNoticed bool
}

// acquireInFlight is the head waiter's acquire (state acquiring).
type acquireInFlight struct {
	seq  uint64
	sent time.Time // the local deadline of a grant counts from here
	// noticed: a release notice came meanwhile, so a refusal is retried at
	// once (the release may have come after the store refused).
	noticed bool
}

// busyInfo is who held the key at the last refusal.
type busyInfo struct {
	holder    string
	expiresAt time.Time // on the store's clock, for the caller to read
}

func (b busyInfo) reply() messages.AcquireReply {
	return messages.AcquireReply{Err: messages.ErrNotAcquired, Holder: b.holder, HolderExpiresAt: b.expiresAt}
}

func (a *leaseActor) onAcquire(m *messages.Acquire) {
	if a.state.shutDown() {
		m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
		return
	}
	if err := a.checkLimit(m); err != nil {
		m.Reply <- messages.AcquireReply{Err: err}
		return
	}
	a.unconfDue = true // confirm an earlier release is gone before acquiring again
	if m.Wait == 0 && (a.state.holds() || a.state == acquiring || len(a.waiters) > 0) {
		// One attempt, and this Manager already holds the key or a waiter
		// is ahead: no re-entry, no queue jumping. Say who really holds it.
		switch {
		case a.state.holds():
			m.Reply <- a.heldHere()
		case a.state == polling:
			m.Reply <- a.busy.reply()
		default:
			a.observers = append(a.observers, m) // the next answer says
		}
		return
	}
	w := &waiter{m: m}
	if m.Wait > 0 {
		w.deadline = a.cfg.Time().Now().Add(m.Wait)
		w.timer = engine.SendAfter(a.cfg.Time(), a.e.Root(), m.Wait, a.self, &protocol.WaitTimeout{Ticket: m.Ticket})
	}
	a.waiters = append(a.waiters, w)
}

// startNext sends an acquire for the first waiter still waiting (state idle);
// in state closing it answers them ErrClosed.
func (a *leaseActor) startNext(ctx actor.Context) {
	for len(a.waiters) > 0 {
		w := a.waiters[0]
		if a.state == closing {
			a.removeAt(0).m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
			continue
		}
		if w.m.Ticket.Abandoned() || w.m.Ctx.Err() != nil {
			a.leave(a.removeAt(0)).m.Reply <- messages.AcquireReply{Err: gaveUp(w.m.Ctx)}
			continue
		}
		if w.attempt == "" {
			w.attempt = a.cfg.NewAttempt()
		}
		a.state = acquiring
		req := backend.AcquireRequest{
			Key: a.key, Owner: a.cfg.Owner, Attempt: w.attempt, TTL: w.m.TTL, Metadata: w.m.Metadata, Wait: w.m.Wait != 0,
			Limit: w.m.Limit,
		}
		if a.cfg.Queue() && req.Wait {
			req.Queue = a.queueRequest(w)
		}
		a.call(ctx, protocol.BackendCall{Call: backend.Call{Op: backend.OpAcquire, Acquire: req}, Ctx: w.m.Ctx})
		a.acq = acquireInFlight{seq: a.seq, sent: a.now}
		return
	}
}

func (a *leaseActor) onAcquireResult(ctx actor.Context, r *protocol.BackendResult) {
	if r.Seq != a.acq.seq {
		return
	}
	switch a.state {
	case acquiring:
		a.state = idle
	case closingAcquiring:
		a.state = closing
	default:
		return
	}
	shut := a.state == closing // Shutdown came while it was in flight
	w := a.waiters[0]
	m := w.m
	switch {
	case r.Err != nil:
		a.removeAt(0)
		err := acquireError(m, r.Err)
		if shut || a.e.Closing() {
			// Closing: the call was cancelled by Close (whose Shutdown may
			// still be on its way to this actor), or failed meanwhile.
			err = messages.ErrClosed
		}
		a.answerObservers(messages.AcquireReply{Err: err})
		if !errors.Is(r.Err, backend.ErrInvalidRequest) {
			// The grant may have happened with the answer lost: release
			// whatever this attempt got before anyone goes on.
			a.releaseThenReply(ctx, w.attempt, 0, m.TTL, m, err)
			return
		}
		m.Reply <- messages.AcquireReply{Err: err}

	case !r.Grant.Acquired && r.Grant.HeldLimit != 0:
		// Held under another limit: refused before anything changed, and
		// no wait can change it while those holdings stand. An entry an
		// earlier poll left in the store's queue is taken out (leave).
		err := error(&messages.LimitMismatchError{Name: m.Name, Limit: max(m.Limit, 1), HeldLimit: r.Grant.HeldLimit})
		if shut {
			err = messages.ErrClosed
		}
		a.answerObservers(messages.AcquireReply{Err: err})
		a.leave(a.removeAt(0)).m.Reply <- messages.AcquireReply{Err: err}

	case !r.Grant.Acquired:
		a.busy = busyInfo{holder: r.Grant.Holder, expiresAt: r.Grant.HolderExpiresAt}
		a.maxToken = max(a.maxToken, r.Grant.HolderToken)
		w.queued, w.pollSent = r.Grant.Queued, a.acq.sent
		a.answerObservers(a.busy.reply())
		if shut { // no poll
			a.leave(a.removeAt(0)).m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
			return
		}
		if m.Ticket.Abandoned() || m.Ctx.Err() != nil {
			// The caller gave up while this attempt was in flight: leave the
			// store's queue now rather than at a poll that may be a TTL away.
			a.leave(a.removeAt(0)).m.Reply <- messages.AcquireReply{Err: gaveUp(m.Ctx)}
			return
		}
		if m.Wait == 0 || (!w.deadline.IsZero() && !a.cfg.Time().Now().Before(w.deadline)) {
			a.leave(a.removeAt(0)).m.Reply <- a.busy.reply()
			return
		}
		if a.acq.noticed { // released meanwhile: try again at once
			w.refusals = 0
			return
		}
		a.state = polling
		var pickup time.Duration // not queued: no pickup window to poll within
		if w.queued {
			pickup = a.cfg.PickupWindow(m.TTL)
		}
		delay := engine.PollDelay(w.refusals, a.e.ReleasesWatched(), pickup, a.e.HandOffsWatched(), r.Grant.HolderExpiresIn)
		a.retryT.ArmOn(a.cfg.Time(), a.e.Root(), delay, a.self, func(g uint64) any { return &protocol.RetryTick{Gen: g} })
		w.refusals++

	default:
		a.removeAt(0)
		tok := r.Grant.Token
		fenced := tok <= a.maxToken
		a.maxToken = max(a.maxToken, tok)
		if shut {
			a.answerObservers(messages.AcquireReply{Err: messages.ErrClosed})
		} else {
			a.answerObservers(messages.AcquireReply{Err: messages.ErrNotAcquired, Holder: a.cfg.Owner, HeldHere: true, HolderExpiresAt: r.Grant.ExpiresAt})
		}
		switch {
		case shut:
			a.releaseThenReply(ctx, w.attempt, tok, m.TTL, m, messages.ErrClosed)
		case fenced:
			a.releaseThenReply(ctx, w.attempt, tok, m.TTL, m, fmt.Errorf("%w: acquire %q: the backend granted token %d, not above token %d seen before for this name", messages.ErrTokenNotIncreasing, m.Name, tok, a.maxToken))
		case !engine.LocalDeadline(a.acq.sent, m.TTL).After(a.now):
			a.releaseThenReply(ctx, w.attempt, tok, m.TTL, m, fmt.Errorf("%w: acquire %q: the grant arrived after its local deadline (TTL %v)", messages.ErrTTLTooShort, m.Name, m.TTL))
		case !m.Ticket.Claim():
			// The caller gave up while the grant was on its way.
			a.startRelease(ctx, w.attempt, tok, m.TTL, nil)
		default:
			if w.queued || w.handNoticed {
				a.cfg.Metrics.HandedOff(w.handNoticed)
			}
			a.hold(m, w.attempt, r.Grant, engine.LocalDeadline(a.acq.sent, m.TTL), false)
		}
	}
}

// heldHere is the refusal of a one-attempt Acquire while this Manager holds
// the key.
func (a *leaseActor) heldHere() messages.AcquireReply {
	return messages.AcquireReply{Err: messages.ErrNotAcquired, Holder: a.cfg.Owner, HeldHere: true, HolderExpiresAt: a.cur.h.ExpiresAt()}
}

// settleObservers answers the one-attempt Acquires waiting to learn who holds
// the key once no attempt in flight will tell them; when nobody is ahead of
// them any more, the first makes its own attempt.
func (a *leaseActor) settleObservers() {
	if len(a.observers) == 0 || a.state == acquiring || a.state.shutDown() {
		return
	}
	switch {
	case a.state.holds():
		a.answerObservers(a.heldHere())
	case a.state == polling:
		a.answerObservers(a.busy.reply())
	case a.state == idle && len(a.waiters) == 0:
		m := a.observers[0]
		a.observers[0] = nil
		a.observers = a.observers[1:]
		a.waiters = append(a.waiters, &waiter{m: m})
	}
}

// answerObservers answers the one-attempt Acquires that waited for the
// attempt in flight to learn who holds the key.
func (a *leaseActor) answerObservers(reply messages.AcquireReply) {
	for _, m := range a.observers {
		m.Reply <- reply
	}
	a.observers = nil
}

func acquireError(m *messages.Acquire, err error) error {
	if cerr := m.Ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, backend.ErrInvalidRequest) {
		return fmt.Errorf("%w: acquire %q: %w", messages.ErrInvalidOption, m.Name, err)
	}
	return fmt.Errorf("leasehold: acquire %q: %w", m.Name, err)
}

func (a *leaseActor) onWaitTimeout(m *protocol.WaitTimeout) {
	i := a.indexOf(m.Ticket)
	if i < 0 || (i == 0 && a.state.acquireSent()) {
		return // gone, or its attempt in flight decides
	}
	w := a.leave(a.removeAt(i))
	reply := a.busy.reply()
	if a.state.holds() {
		reply = a.heldHere()
	}
	w.m.Reply <- reply
}

// dropWaiter removes a waiter whose caller gave up.
func (a *leaseActor) dropWaiter(t *lease.Ticket, err error) {
	i := a.indexOf(t)
	if i < 0 || (i == 0 && a.state.acquireSent()) {
		return // its attempt in flight will find the ticket abandoned
	}
	a.leave(a.removeAt(i)).m.Reply <- messages.AcquireReply{Err: err}
}

// wake retries the head waiter now: the key was released somewhere.
func (a *leaseActor) wake() {
	switch a.state {
	case polling:
		a.retryT.Stop()
		a.state = idle
		a.waiters[0].refusals = 0
	case acquiring:
		// The release may have come after the attempt in flight was
		// answered "busy" on the server: retry as soon as it returns.
		a.acq.noticed = true
	}
}

func (a *leaseActor) indexOf(t *lease.Ticket) int {
	for i, w := range a.waiters {
		if w.m.Ticket == t {
			return i
		}
	}
	return -1
}

// removeAt takes waiter i out of the queue; the head of a polling queue takes
// its poll with it.
func (a *leaseActor) removeAt(i int) *waiter {
	w := a.waiters[i]
	if w.timer != nil {
		w.timer()
	}
	if i == 0 && a.state == polling {
		a.retryT.Stop()
		a.state = idle
	}
	a.waiters[i] = nil
	a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
	if len(a.waiters) == 0 && cap(a.waiters) > 8 {
		a.waiters = nil // let a long queue's array go
	}
	return w
}

// gaveUp is the answer to a waiter whose caller gave up: its context's error,
// or context.Canceled when the caller abandoned its ticket first.
func gaveUp(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.Canceled
}
