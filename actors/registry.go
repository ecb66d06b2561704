package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/leasehold/leasehold/messages"
)

// idleSweep is how often idle lease actors are stopped. An actor idle at one
// sweep is stopped at the next unless a command came meanwhile, so a name
// used in a tight acquire/release loop keeps its actor, and memory follows
// the live leases within two sweeps.
const idleSweep = 500 * time.Millisecond

// child is a running lease actor and the number of commands forwarded to it.
type child struct {
	pid        *actor.PID
	sent       uint64
	idle       bool   // reported idle after handling all `sent` commands
	idleSweeps uint64 // the sweep count when it was reported idle
}

// registry routes commands by key to lease actors, spawns them on demand and
// stops them when idle. It is the parent of every actor of one Manager, so
// stopping it stops them all; Stopped closes the channel Spawn returned.
type registry struct {
	cfg      *Config
	props    func(producer actor.Producer) *actor.Props
	children map[string]*child
	idle     map[string]*child
	backend  *actor.PID
	hub      *actor.PID
	stopped  chan struct{}

	// leaseProps is shared by every lease actor (Props per actor cost a
	// tenth of a held lease's memory); its producer, which protoactor calls
	// synchronously inside Spawn, takes the key from spawning.
	leaseProps *actor.Props
	spawning   string
	root       *actor.RootContext
	leases     sync.WaitGroup // lease actors not yet stopped

	timers *scheduler.TimerScheduler
	sweeps uint64 // sweeps done
	sweepT timer

	closing      bool
	shutdownWait int
	shutdownDone chan struct{}
}

// Engine is the running actors of one Manager.
type Engine struct {
	// Registry is the address of every command.
	Registry *actor.PID
	// Stopped is closed once the registry and all its children have stopped.
	Stopped <-chan struct{}
	pool    *pool
}

// Start spawns the actors of one Manager in root's system.
func Start(root *actor.RootContext, cfg *Config) *Engine {
	cfg.instance = newInstance()
	stopped := make(chan struct{})
	p := newPool()
	props := func(producer actor.Producer) *actor.Props {
		return actor.PropsFromProducer(producer, actor.WithDispatcher(p), actor.WithSupervisor(stopOnFailure))
	}
	pid := root.Spawn(props(func() actor.Actor {
		return &registry{cfg: cfg, props: props, stopped: stopped,
			children: map[string]*child{}, idle: map[string]*child{}}
	}))
	return &Engine{Registry: pid, Stopped: stopped, pool: p}
}

// Stop stops every actor (after a Shutdown, there is nothing left to
// release) and waits for them and their dispatcher.
func (e *Engine) Stop(root *actor.RootContext) {
	root.Stop(e.Registry)
	<-e.Stopped
	e.pool.stop()
}

// stopOnFailure stops a panicking child rather than restarting it with empty
// state: its Stopping handler answers its callers and ends its holding.
var stopOnFailure = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		root := ctx.ActorSystem().Root
		self := ctx.Self()
		r.timers = scheduler.NewTimerScheduler(root)
		r.hub = ctx.Spawn(r.props(newHub))
		r.backend = ctx.Spawn(r.props(func() actor.Actor { return newBackendActor(r.cfg, self, root) }))
		// The lock-free mailbox costs a quarter of the ring-buffer one's memory;
		// a lease actor sees a few messages per renewal period, so its lower
		// peak throughput does not matter.
		//
		// Lease actors are spawned from the root context, not as children:
		// protoactor's child set keeps a stopped child's PID (and through its
		// cached process, the whole actor) in its backing array, so memory
		// would follow the most leases ever held, not the live ones. The
		// registry tracks them itself instead: each tells it when it stops
		// (messages.LeaseStopped), and Stopping waits for them all.
		r.root = root
		r.leaseProps = r.props(func() actor.Actor {
			return newLeaseActor(r.cfg, r.spawning, self, r.backend, r.hub, r.leases.Done)
		}).Configure(actor.WithMailbox(actor.UnboundedLockfree()), actor.WithGuardian(stopOnFailure))
	case *messages.Acquire:
		if r.closing {
			m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
			return
		}
		r.forward(ctx, m.Key, m, true)
	case *messages.Renew:
		if !r.forward(ctx, m.Key, m, false) {
			m.Reply <- messages.ErrStale
		}
	case *messages.Release:
		if !r.forward(ctx, m.Key, m, false) {
			m.Reply <- nil
		}
	case *messages.CancelWait:
		r.forward(ctx, m.Key, m, false)
	case *messages.ReleaseNotice:
		r.forward(ctx, m.Key, m, false)
	case *messages.Subscribe, *messages.Unsubscribe:
		ctx.Send(r.hub, m)
	case *messages.Idle:
		if c := r.children[m.Key]; c != nil && c.pid.Equal(m.From) && c.sent == m.Handled && !r.closing {
			c.idle, c.idleSweeps = true, r.sweeps
			r.idle[m.Key] = c
			if r.sweepT.gen == 0 {
				r.armSweep(ctx)
			}
		}
	case *messages.SweepTick:
		if !r.sweepT.fired(m.Gen) || r.closing {
			return
		}
		r.sweeps++
		for key, c := range r.idle {
			if c.idleSweeps+1 < r.sweeps { // idle for a whole sweep period
				r.drop(key, c)
				r.stopLease(ctx, c)
			}
		}
		if len(r.idle) > 0 {
			r.armSweep(ctx)
		}
	case *messages.Shutdown:
		r.closing = true
		r.shutdownDone = m.Reply
		r.shutdownWait = len(r.children)
		ctx.Send(r.backend, m) // first: see messages.Shutdown
		for key := range r.children {
			r.forward(ctx, key, m, false)
		}
		r.checkShutdown()
	case *messages.ShutdownDone:
		if c := r.children[m.Key]; c != nil {
			r.drop(m.Key, c) // its LeaseStopped must not count again
			r.stopLease(ctx, c)
		}
		r.shutdownWait--
		r.checkShutdown()
	case *messages.LeaseStopped:
		// Only a lease actor that stopped on its own (a panic) is still
		// mapped; one the registry stopped was dropped already.
		if c := r.children[m.Key]; c != nil && c.pid.Equal(m.PID) {
			r.drop(m.Key, c)
			if r.closing {
				r.shutdownWait--
				r.checkShutdown()
			}
		}
	case *actor.Stopping:
		r.closing = true // nothing is spawned from now on
		r.sweepT.stop()
		for key, c := range r.children {
			r.drop(key, c)
			r.stopLease(ctx, c)
		}
		r.leases.Wait() // quick: lease actors never block, and after Shutdown they hold nothing
	case *actor.Stopped:
		close(r.stopped)
	}
}

// forward sends msg to the lease actor of key, spawning it if spawn is set. It
// reports false when there is no such actor.
func (r *registry) forward(ctx actor.Context, key string, msg any, spawn bool) bool {
	c := r.children[key]
	if c == nil {
		if !spawn || r.closing {
			return false
		}
		r.spawning = key
		r.leases.Add(1)
		c = &child{pid: r.root.Spawn(r.leaseProps)}
		r.children[key] = c
	}
	c.sent++
	if c.idle {
		c.idle = false
		delete(r.idle, key)
	}
	ctx.Send(c.pid, msg)
	return true
}

func (r *registry) drop(key string, c *child) {
	delete(r.children, key)
	delete(r.idle, key)
	if len(r.children) == 0 {
		// Go maps never shrink: start afresh once the last lease is gone.
		r.children, r.idle = map[string]*child{}, map[string]*child{}
	}
}

func (r *registry) stopLease(ctx actor.Context, c *child) { ctx.Stop(c.pid) }

func (r *registry) armSweep(ctx actor.Context) {
	r.sweepT.arm(r.timers, idleSweep, ctx.Self(), func(g uint64) any { return &messages.SweepTick{Gen: g} })
}

func (r *registry) checkShutdown() {
	if r.closing && r.shutdownWait <= 0 && r.shutdownDone != nil {
		close(r.shutdownDone)
		r.shutdownDone = nil
	}
}
