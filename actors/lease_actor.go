package actors

import (
	"context"
	"github.com/leasehold/leasehold/internal/engine"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/messages"
)

// leaseActor owns one key: its state (lease_state.go), its waiters
// (lease_waiters.go), its holding and renewals (lease_holding.go), its
// releases (lease_release.go, unconfirmed.go) and its part in Close
// (lease_shutdown.go). It never blocks: backend calls go to the backend actor
// (or, for an Inline backend, are made right here), and it waits only by
// timers that send it ticks.
type leaseActor struct {
	e      *engine.Engine
	cfg    *engine.Config
	entry  *engine.Entry // its entry in the router
	key    string
	self   *actor.PID
	timers *scheduler.TimerScheduler

	now     time.Time // when the message being handled arrived
	state   leaseState
	closing bool   // Shutdown has come; see leaseState
	handled uint64 // commands received through the router
	idleAt  uint64 // handled when it last reported itself idle
	seq     uint64 // of the last backend call sent

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

	cur     *holding        // states held and renewing
	clock   *engine.Alarms  // the alarm heap of this key (engine.Engine.AlarmsFor)
	holdA   *engine.Alarm   // the holding's local deadline, in clock
	renewer *engine.Renewer // the Manager's (engine.Engine.Renewer)

	rel         releaseInFlight // state releasing
	unconfirmed []*pendingRelease
	unconfDue   bool
	unconfT     engine.TickTimer

	// An Inline backend (memory) is called right here rather than through
	// the backend actor, saving two message hops per call (the renewer's
	// batches still go through the backend actor); its results queue
	// in inbox and are handled before the next message, exactly as if they
	// had come back through the mailbox.
	immediate bool
	inbox     []messages.BackendResult
}

func newLeaseActor(e *engine.Engine, en *engine.Entry) actor.Actor {
	return &leaseActor{e: e, cfg: e.Config(), entry: en, key: en.Key(), immediate: e.Config().Inline(),
		clock: e.AlarmsFor(en.Key()), renewer: e.Renewer()}
}

func (a *leaseActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Stopping:
		a.onStopping(ctx)
		return
	case *actor.Stopped:
		ctx.Send(a.e.Registry(), &messages.LeaseStopped{PID: a.self})
		a.e.LeaseStopped()
		return
	}
	a.now = time.Now()
	a.handle(ctx, ctx.Message())
	for {
		for i := 0; i < len(a.inbox); i++ {
			res := a.inbox[i]
			a.inbox[i] = messages.BackendResult{}
			a.onResult(ctx, &res)
		}
		a.inbox = a.inbox[:0]
		a.settle(ctx)
		if len(a.inbox) == 0 {
			return
		}
	}
}

func (a *leaseActor) handle(ctx actor.Context, msg any) {
	// Whatever the message, a holding past its local deadline is lost first:
	// after a pause of the process, a Release or Renew may be handled before
	// the deadline timer's tick.
	if c := a.cur; c != nil && !a.now.Before(c.deadline) {
		a.lose(ctx, lease.ReasonExpired, lease.ErrDeadlinePassed)
	}
	switch m := msg.(type) {
	case *actor.Started:
		a.self = ctx.Self()
		a.timers = scheduler.NewTimerScheduler(ctx.ActorSystem().Root)
	case *messages.Acquire:
		a.handled++
		a.onAcquire(m)
	case *messages.CancelWait:
		a.handled++
		a.dropWaiter(m.Ticket, context.Canceled)
	case *messages.Renew:
		a.handled++
		a.onRenew(ctx, m)
	case *messages.StopRenewing:
		a.handled++
		a.onStopRenewing(m)
	case *messages.Release:
		a.handled++
		a.onRelease(ctx, m)
	case *messages.ReleaseNotice:
		a.handled++
		a.wake()
	case *messages.HandOffNotice:
		a.handled++
		a.onHandOff(ctx, m.HandOff)
	case *messages.Shutdown:
		a.handled++
		a.onShutdown(ctx)
	case *messages.BackendResult:
		a.onResult(ctx, m)
	case *messages.HoldTick:
		if a.cur != nil && a.clock.Fired(a.holdA, m.Gen) {
			a.onHoldTick(ctx)
		}
	case *messages.RetryTick:
		if a.retryT.Fired(m.Gen) && a.state == polling {
			a.state = idle
		}
	case *messages.ReleaseRetryTick:
		if a.unconfT.Fired(m.Gen) {
			a.unconfDue = true
		}
	case *messages.WaitTimeout:
		a.onWaitTimeout(m)
	}
}

func (a *leaseActor) onResult(ctx actor.Context, r *messages.BackendResult) {
	switch r.Op {
	case backend.OpAcquire:
		a.onAcquireResult(ctx, r)
	case backend.OpRenew:
		a.onRenewResult(ctx, r)
	case backend.OpRelease:
		a.onReleaseResult(r)
	}
}

// settle runs after every message: it starts what is due when no ownership
// call is in flight (an unconfirmed release, else the next acquire), and
// reports idleness or the end of a shutdown.
func (a *leaseActor) settle(ctx actor.Context) {
	a.settleObservers()
	if a.state != idle && a.state != polling {
		return
	}
	if a.retryUnconfirmed(ctx) || a.state == polling {
		return
	}
	a.startNext(ctx)
	switch {
	case a.state != idle:
	case a.closing:
		a.state = closed
		ctx.Send(a.e.Registry(), &messages.ShutdownDone{PID: a.self})
	case len(a.waiters) == 0 && len(a.unconfirmed) == 0 && a.idleAt != a.handled:
		// Nothing held, nobody waiting: the router's sweep may retire
		// this actor once no command has come for a whole sweep period.
		a.idleAt = a.handled
		a.entry.SetIdle(a.handled)
	}
}

// call sends a backend call (or, for an Inline backend, makes it and
// queues its result).
func (a *leaseActor) call(ctx actor.Context, m messages.BackendCall) {
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
func (a *leaseActor) send(ctx actor.Context, m messages.BackendCall) {
	ctx.Send(a.e.Backend(), &m)
}
