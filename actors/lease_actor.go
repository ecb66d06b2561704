package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/engine"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// leaseActor owns one key: its state (lease_state.go), its waiters
// (lease_waiters.go), its holding and renewals (lease_holding.go), its
// releases (lease_release.go, unconfirmed.go) and its part in Close
// (lease_shutdown.go). It never blocks: backend calls go to the backend actor
// (or, for an Inline backend, are made right here), and it waits only by
// timers that send it ticks, on the engine's clock (Config.Clock).
type leaseActor struct {
	e     *engine.Engine
	cfg   *engine.Config
	entry *engine.Entry // its entry in the router
	key   string
	self  *actor.PID

	now   time.Time // when the message being handled arrived
	state leaseState
	// immediate: an Inline backend (memory) is called right here rather
	// than through the backend actor, saving two message hops per call (the
	// renewer's batches still go through the backend's workers); its
	// results queue in inbox and are handled before the next message,
	// exactly as if they had come back through the mailbox.
	immediate bool
	unconfDue bool   // an unconfirmed release is due (unconfirmed.go)
	handled   uint64 // commands received through the router
	idleAt    uint64 // handled when it last reported itself idle (or able to sleep)
	seq       uint64 // of the last backend call sent

	waiters   []*waiter
	observers []*messages.Acquire
	acq       acquireInFlight  // state acquiring
	retryT    engine.TickTimer // state polling
	// busy is the last refusal seen: who holds the key elsewhere. A
	// one-attempt Acquire that cannot ask the backend itself (a waiter is
	// ahead of it) is answered with it, or, while an attempt is in flight,
	// joins observers and gets that attempt's answer.
	busy busyInfo
	// maxToken is the highest token this actor has seen for the key: a
	// grant at or below it breaks the store's fencing promise and is
	// refused (defence in depth; the backends guarantee it).
	maxToken uint64

	cur     *current        // states held and renewing
	clock   *engine.Alarms  // the alarm heap of this key (engine.Engine.AlarmsFor)
	holdA   *engine.Alarm   // the holding's local deadline, in clock
	renewer *engine.Renewer // the Manager's (engine.Engine.Renewer)

	rel         *releaseInFlight // state releasing
	unconfirmed []*pendingRelease
	unconfT     engine.TickTimer

	inbox []protocol.BackendResult // see immediate
}

func newLeaseActor(e *engine.Engine, en *engine.Entry) actor.Actor {
	a := &leaseActor{e: e, cfg: e.Config(), entry: en, key: en.StoreKey(), immediate: e.Config().Inline(),
		clock: e.AlarmsFor(en.Key()), renewer: e.Renewer()}
	if c, ok := en.TakeSleeper().(*current); ok {
		a.wakeFrom(c)
	}
	return a
}

func (a *leaseActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		return
	case *actor.Stopping:
		a.onStopping(ctx)
		return
	case *actor.Stopped:
		ctx.Send(a.e.Registry(), &protocol.LeaseStopped{PID: a.self})
		a.e.LeaseStopped()
		return
	case *stateQuery:
		a.handled++ // through the router too
		m.reply <- a.state
		a.maySleep()
		return
	case *messages.Acquire, *messages.CancelWait, *messages.Renew, *messages.StopRenewing,
		*messages.Release, *protocol.ReleaseNotice, *protocol.HandOffNotice, *messages.Shutdown,
		*protocol.HoldTick:
		a.handled++ // a command through the router
	case *protocol.BackendResult:
		if m.Routed {
			a.handled++ // the renewer's answer, through the router
		}
	}
	a.now = a.cfg.Time().Now()
	// Whatever the message, a holding past its local deadline is lost first:
	// after a pause of the process, a Release or Renew may be handled before
	// the deadline timer's tick.
	if c := a.cur; c != nil && !a.now.Before(c.h.Deadline()) {
		a.lose(ctx, lease.ReasonExpired, lease.ErrDeadlinePassed)
	}
	a.dispatch(ctx, ctx.Message())
	for {
		for i := 0; i < len(a.inbox); i++ {
			res := a.inbox[i]
			a.inbox[i] = protocol.BackendResult{}
			a.dispatch(ctx, &res)
		}
		a.inbox = a.inbox[:0]
		a.settle(ctx)
		if len(a.inbox) == 0 {
			if a.state == held {
				a.inbox = nil // a held lease sits for long: it keeps no array
			}
			return
		}
	}
}

// stateQuery asks a lease actor for its state (the transition tests).
type stateQuery struct{ reply chan<- leaseState }

// dispatch hands msg to the handler of the current state. Each handler lists
// what its state accepts; anything else is stale there (an answer or a tick
// of something ended, a notice nobody waits for) and ignored. The idle and
// closing states are left within the message that enters them (settle), so
// only their stale messages reach them.
func (a *leaseActor) dispatch(ctx actor.Context, msg any) {
	switch a.state {
	case idle, closing:
		a.whileOpen(ctx, msg)
	case acquiring:
		a.whileAcquiring(ctx, msg)
	case polling:
		a.whilePolling(ctx, msg)
	case held:
		a.whileHeld(ctx, msg)
	case renewing:
		a.whileRenewing(ctx, msg)
	case releasing:
		a.whileReleasing(ctx, msg)
	case closingAcquiring:
		a.whileClosingAcquiring(ctx, msg)
	case closingReleasing:
		a.whileClosingReleasing(msg)
	case closed:
		a.whileClosed(msg)
	}
}

// whileOpen is what every state before Shutdown accepts beside its own
// messages, and all that idle accepts: waiters come and go, Shutdown comes,
// the unconfirmed releases' retry tick; and Renew, StopRenewing and Release
// of a holding that has ended (the states that hold handle them first).
// idle (nothing held, nothing in flight, nobody waiting) has nothing else:
// an Acquire queues a waiter, whose acquire settle sends.
func (a *leaseActor) whileOpen(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *messages.Acquire:
		a.onAcquire(m)
	case *messages.CancelWait:
		a.dropWaiter(m.Ticket, context.Canceled)
	case *protocol.WaitTimeout:
		a.onWaitTimeout(m)
	case *messages.Shutdown:
		a.onShutdown(ctx)
	case *protocol.ReleaseRetryTick:
		a.onReleaseRetryTick(m)
	case *messages.Renew:
		m.Reply <- messages.ErrStale
	case *messages.StopRenewing:
		m.Reply <- messages.ErrStale
	case *messages.Release:
		m.Reply <- nil // already ended: nothing to do, no backend call
	}
}

// whileAcquiring: the head waiter's acquire is in flight; more waiters may
// queue behind it, and one-attempt Acquires wait for its answer.
func (a *leaseActor) whileAcquiring(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *protocol.BackendResult:
		if m.Op == backend.OpAcquire {
			a.onAcquireResult(ctx, m)
		}
	case *protocol.ReleaseNotice:
		a.wake() // a refusal is retried at once
	case *protocol.HandOffNotice:
		a.onHandOff(ctx, m.HandOff) // the acquire picks it up
	default:
		a.whileOpen(ctx, msg)
	}
}

// whilePolling: the head waiter was refused and waits for its retry tick, a
// release notice or a hand-off notice.
func (a *leaseActor) whilePolling(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *protocol.RetryTick:
		if a.retryT.Fired(m.Gen) {
			a.state = idle // settle sends the acquire
		}
	case *protocol.ReleaseNotice:
		a.wake()
	case *protocol.HandOffNotice:
		a.onHandOff(ctx, m.HandOff)
	default:
		a.whileOpen(ctx, msg)
	}
}

// whileHeld: this Manager holds the key; its next engine.Renewal, if any, is the
// renewer's. Waiters queue behind the holding. (No waiter has an acquire
// attempt yet, so a hand-off notice is stale.)
func (a *leaseActor) whileHeld(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *messages.Renew:
		a.onRenew(ctx, m)
	case *messages.StopRenewing:
		a.onStopRenewing(m)
	case *messages.Release:
		a.onRelease(ctx, m)
	case *protocol.BackendResult:
		if m.Op == backend.OpRenew {
			a.onRenewResult(ctx, m) // of the renewal the renewer sent
		}
	case *protocol.HoldTick:
		if a.clock.Fired(a.holdA, m.Gen) {
			a.onHoldTick(ctx)
		}
	default:
		a.whileOpen(ctx, msg)
	}
}

// whileRenewing: held, with a renewal in flight; an explicit Renew queues
// behind it.
func (a *leaseActor) whileRenewing(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *protocol.BackendResult:
		if m.Op == backend.OpRenew {
			a.onRenewResult(ctx, m)
		}
	case *messages.Renew:
		a.onRenew(ctx, m)
	case *messages.StopRenewing:
		a.onStopRenewing(m)
	case *messages.Release:
		a.onRelease(ctx, m)
	case *protocol.HoldTick:
		if a.clock.Fired(a.holdA, m.Gen) {
			a.onHoldTick(ctx)
		}
	default:
		a.whileOpen(ctx, msg)
	}
}

// whileReleasing: a release is in flight; the waiters' next acquire waits
// for its answer.
func (a *leaseActor) whileReleasing(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *protocol.BackendResult:
		if m.Op == backend.OpRelease {
			a.onReleaseResult(m)
		}
	case *protocol.HandOffNotice:
		a.onHandOff(ctx, m.HandOff) // the head's next acquire picks it up
	default:
		a.whileOpen(ctx, msg)
	}
}

// whileClosingAcquiring: Shutdown came during the head waiter's acquire; only
// its answer matters now, and every command is answered at once.
func (a *leaseActor) whileClosingAcquiring(ctx actor.Context, msg any) {
	if m, ok := msg.(*protocol.BackendResult); ok && m.Op == backend.OpAcquire {
		a.onAcquireResult(ctx, m)
		return
	}
	a.whileClosed(msg)
}

// whileClosingReleasing: a release is in flight after Shutdown; only its
// answer matters now, and every command is answered at once.
func (a *leaseActor) whileClosingReleasing(msg any) {
	if m, ok := msg.(*protocol.BackendResult); ok && m.Op == backend.OpRelease {
		a.onReleaseResult(m)
		return
	}
	a.whileClosed(msg)
}

// whileClosed: Shutdown has been handled. Every command is answered at once,
// as for a lease that has ended; the rest is stale.
func (a *leaseActor) whileClosed(msg any) {
	switch m := msg.(type) {
	case *messages.Acquire:
		m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
	case *messages.Renew:
		m.Reply <- messages.ErrStale
	case *messages.StopRenewing:
		m.Reply <- messages.ErrStale
	case *messages.Release:
		m.Reply <- nil
	}
}

// onReleaseRetryTick makes the unconfirmed releases due (settle sends the
// oldest when no ownership call is in flight).
func (a *leaseActor) onReleaseRetryTick(m *protocol.ReleaseRetryTick) {
	if a.unconfT.Fired(m.Gen) {
		a.unconfDue = true
	}
}

// settle runs after every message: it starts what is due when no ownership
// call is in flight (an unconfirmed release, else the next acquire), and
// reports idleness or the end of a shutdown.
func (a *leaseActor) settle(ctx actor.Context) {
	a.settleObservers()
	if a.state == held {
		a.maySleep()
		return
	}
	if a.state != idle && a.state != polling && a.state != closing {
		return
	}
	if a.retryUnconfirmed(ctx) || a.state == polling {
		return
	}
	a.startNext(ctx)
	switch {
	case a.state == closing:
		a.state = closed
		ctx.Send(a.e.Registry(), &protocol.ShutdownDone{PID: a.self})
	case a.state != idle:
	case len(a.waiters) == 0 && len(a.unconfirmed) == 0 && a.idleAt != a.handled:
		// Nothing held, nobody waiting: the router's sweep may retire
		// this actor once no command has come for a whole sweep period.
		a.idleAt = a.handled
		a.entry.SetIdle(a.handled)
	}
}

// call sends a backend call (or, for an Inline backend, makes it and
// queues its result).
func (a *leaseActor) call(ctx actor.Context, m protocol.BackendCall) {
	a.seq++
	m.Seq, m.ReplyTo = a.seq, a.self
	if a.immediate {
		a.inbox = append(a.inbox, engine.Perform(a.cfg, context.Background(), true, &m)) // m stays on the stack
		return
	}
	a.send(ctx, m)
}

// send hands m to the backend actor. (A function of its own, so that only
// this path moves the call to the heap.)
func (a *leaseActor) send(ctx actor.Context, m protocol.BackendCall) {
	ctx.Send(a.e.Backend(), &m)
}
