package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/messages"
)

// child is a running lease actor and the number of commands forwarded to it.
type child struct {
	pid  *actor.PID
	sent uint64
}

// registry routes commands by key to lease actors, spawns them on demand and
// stops them when idle. It is the parent of every actor of one Manager, so
// stopping it stops them all; Stopped closes the channel Spawn returned.
type registry struct {
	cfg      *Config
	children map[string]*child
	byID     map[string]string // child PID id → key
	backend  *actor.PID
	hub      *actor.PID
	stopped  chan struct{}

	closing      bool
	shutdownWait int
	shutdownDone chan struct{}
}

// Spawn starts the actors of one Manager in root's system and returns the
// registry, the address of every command, and a channel closed once the
// registry and all its children have stopped.
func Spawn(root *actor.RootContext, cfg *Config) (*actor.PID, <-chan struct{}) {
	stopped := make(chan struct{})
	props := actor.PropsFromProducer(func() actor.Actor {
		return &registry{cfg: cfg, children: map[string]*child{}, byID: map[string]string{}, stopped: stopped}
	}, actor.WithSupervisor(stopOnFailure))
	return root.Spawn(props), stopped
}

// stopOnFailure stops a panicking child rather than restarting it with empty
// state: its Stopping handler answers its callers and ends its holding.
var stopOnFailure = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		root := ctx.ActorSystem().Root
		self := ctx.Self()
		r.hub = ctx.Spawn(actor.PropsFromProducer(newHub))
		r.backend = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return newBackendActor(r.cfg, self, root) }))
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
			r.drop(m.Key, c)
			ctx.Stop(c.pid)
		}
	case *messages.Shutdown:
		r.closing = true
		r.shutdownDone = m.Reply
		r.shutdownWait = len(r.children)
		for key := range r.children {
			r.forward(ctx, key, m, false)
		}
		r.checkShutdown()
	case *messages.ShutdownDone:
		if c := r.children[m.Key]; c != nil {
			r.drop(m.Key, c) // its Terminated must not count again
		}
		r.shutdownWait--
		r.checkShutdown()
	case *actor.Terminated:
		if key, ok := r.byID[m.Who.Id]; ok { // a child stopped on its own (a panic)
			r.drop(key, r.children[key])
			if r.closing {
				r.shutdownWait--
				r.checkShutdown()
			}
		}
	case *actor.Stopped:
		close(r.stopped)
	}
}

// forward sends msg to the lease actor of key, spawning it if spawn is set. It
// reports false when there is no such actor.
func (r *registry) forward(ctx actor.Context, key string, msg any, spawn bool) bool {
	c := r.children[key]
	if c == nil {
		if !spawn {
			return false
		}
		backendPID, hubPID := r.backend, r.hub
		c = &child{pid: ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return newLeaseActor(r.cfg, key, backendPID, hubPID)
		}))}
		r.children[key] = c
		r.byID[c.pid.Id] = key
	}
	c.sent++
	ctx.Send(c.pid, msg)
	return true
}

func (r *registry) drop(key string, c *child) {
	delete(r.children, key)
	delete(r.byID, c.pid.Id)
}

func (r *registry) checkShutdown() {
	if r.closing && r.shutdownWait <= 0 && r.shutdownDone != nil {
		close(r.shutdownDone)
		r.shutdownDone = nil
	}
}
