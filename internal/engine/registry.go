package engine

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// idleSweep is how often idle lease actors are retired. An actor idle at one
// sweep is retired at the next unless a command came meanwhile, so a name used
// in a tight acquire/release loop keeps its actor, and memory follows the live
// leases within two sweeps.
const idleSweep = 500 * time.Millisecond

// registry retires idle lease actors and runs Shutdown: it sends Shutdown to
// the backend actor and then to every lease actor, and answers when every
// lease actor is done.
type registry struct {
	e      *Engine
	timers *scheduler.TimerScheduler
	sweepT timer

	closing      bool
	shutdownWait map[string]struct{} // lease actors (PID.Id) not done with Shutdown
	shutdownDone chan struct{}
}

func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.timers = scheduler.NewTimerScheduler(ctx.ActorSystem().Root)
		r.armSweep(ctx)
	case *protocol.SweepTick:
		if !r.sweepT.fired(m.Gen) || r.closing {
			return
		}
		r.e.Sweep()
		r.armSweep(ctx)
	case *messages.Shutdown:
		if r.closing {
			close(m.Reply)
			return
		}
		r.closing = true
		r.sweepT.stop()
		r.e.router.closing.Store(true) // nothing spawns from now on
		r.shutdownDone = m.Reply
		ctx.Send(r.e.backend, m) // first: see messages.Shutdown
		pids := r.e.router.all(true)
		r.shutdownWait = make(map[string]struct{}, len(pids))
		for _, pid := range pids {
			r.shutdownWait[pid.Id] = struct{}{}
		}
		// Off this Receive, which must not wait (the lease actors run on
		// the goroutines that tell them); from the root context, not ctx.
		// Engine.Stop waits for it.
		r.e.tellWG.Go(func() { forEachPID(pids, func(pid *actor.PID) { r.e.root.Send(pid, m) }) })
		r.checkShutdown()
	case *protocol.ShutdownDone:
		delete(r.shutdownWait, m.PID.Id)
		r.checkShutdown()
	case *protocol.LeaseStopped:
		// One that stopped on its own (a panic) is done too.
		delete(r.shutdownWait, m.PID.Id)
		r.checkShutdown()
	case *actor.Stopping:
		r.closing = true
		r.sweepT.stop()
	case *actor.Stopped:
		close(r.e.regDone)
	}
}

func (r *registry) armSweep(ctx actor.Context) {
	r.sweepT.arm(r.timers, idleSweep, ctx.Self(), func(g uint64) any { return &protocol.SweepTick{Gen: g} })
}

func (r *registry) checkShutdown() {
	if r.closing && len(r.shutdownWait) == 0 && r.shutdownDone != nil {
		close(r.shutdownDone)
		r.shutdownDone = nil
	}
}
