package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// onShutdown starts the actor's part of Close: waiters are answered ErrClosed,
// the holding ends as released and is released once; the call in flight, if
// any, finishes first (settle then reports ShutdownDone). It moves the actor
// to the closing state that says what is still in flight (see leaseState).
func (a *leaseActor) onShutdown(ctx actor.Context) {
	if a.state.shutDown() {
		return
	}
	if a.state == releasing && a.rel != nil && a.rel.retry != nil {
		// A retry of an unconfirmed release: Close does not wait for it.
		// It may have been sent after the backend actor cancelled the calls
		// in flight, and then runs under Close's context, which a store that
		// does not answer would hold for the whole release timeout. It
		// has been sent once already; the store frees the name at its TTL.
		// Its answer, if one comes, is ignored (its seq is stale).
		a.rel.retry.tries++ // so that it is not sent again (retryUnconfirmed)
		a.state, a.rel = idle, nil
	}
	a.answerObservers(messages.AcquireReply{Err: messages.ErrClosed})
	for i := len(a.waiters) - 1; i >= 0; i-- {
		if i == 0 && a.state == acquiring {
			break // its result releases any grant and answers ErrClosed
		}
		a.leave(a.removeAt(i)).m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
	}
	if c := a.cur; c != nil {
		a.end(closedReleased(c.h), false)
		a.startRelease(ctx, c.h.Attempt, c.h.Token, c.ttl, nil)
	}
	// What is left in flight: nothing (idle; polling stopped with its
	// waiter), the head waiter's acquire, or a release.
	switch a.state {
	case idle:
		a.state = closing
	case acquiring:
		a.state = closingAcquiring
	case releasing:
		a.state = closingReleasing
	}
	// A waiter that left the store's queue sends its clean-up release from
	// settle (retryUnconfirmed), before the actor reports itself done.
}

func closedReleased(h *lease.Holding) error {
	return fmt.Errorf("%w: lease %q (token %d) by Manager.Close", messages.ErrReleased, h.Name, h.Token)
}

// onStopping runs when the actor stops: normally idle, or put to sleep
// (sleeper.go), with nothing to do. After a forced stop or a panic it still
// answers every waiter and ends the holding, so no caller waits forever and
// no handle claims a key it no longer renews.
func (a *leaseActor) onStopping(ctx actor.Context) {
	if !a.e.Drop(a.entry, a.self) { // else commands from now on go to a new actor
		return // asleep: the holding, its renewal and its alarm live on in the entry
	}
	if a.holdA != nil {
		a.clock.Disarm(a.holdA)
	}
	a.retryT.Stop()
	a.unconfT.Stop()
	a.answerObservers(messages.AcquireReply{Err: messages.ErrClosed})
	for _, w := range a.waiters {
		if w.timer != nil {
			w.timer()
		}
		w.m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
	}
	a.waiters = nil
	if c := a.cur; c != nil {
		if a.e.Closing() {
			// Close's context ended before this actor handled Shutdown:
			// the holding ends as Close ends it, released; its release
			// is not sent, and the store frees the key at its TTL.
			a.end(closedReleased(c.h), false)
		} else {
			// A panic: the holding is lost, and its release sent without
			// waiting for an answer.
			a.end(fmt.Errorf("%w: lease %q (token %d): its actor stopped", messages.ErrLost, c.h.Name, c.h.Token), true)
			ctx.Send(a.e.Backend(), &protocol.BackendCall{Call: backend.Call{Op: backend.OpRelease, Release: backend.ReleaseRequest{
				Key: a.key, Owner: a.cfg.Owner, Attempt: c.h.Attempt, Token: c.h.Token,
			}}})
		}
	}
	rel := a.rel
	a.rel = nil
	if rel == nil {
		return
	}
	if rel.reply != nil {
		rel.reply <- messages.ErrClosed
	}
	if rel.then != nil {
		rel.then()
	}
}
