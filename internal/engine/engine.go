package engine

import (
	"context"
	"hash/maphash"
	"runtime"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// Engine is the running actors of one Manager: a lease actor per key in use,
// found through the router; the backend actor; the event hub; and the
// registry, which retires idle lease actors and runs Shutdown.
type Engine struct {
	root   *actor.RootContext
	cfg    *Config
	router *router
	// alarms serve the holdings' renewals and deadlines; a lease actor uses
	// the one its key hashes to, so that cores do not meet on one heap.
	alarms []*alarms
	// renewer owns the due times of the holdings' renewals. One per
	// Manager: every heap of its own would send a batch of its own, and
	// round trips would grow with the shards.
	renewer *renewer
	hub     *actor.PID
	backend *actor.PID
	back    *backendActor // the backend actor itself, for the watches' flags
	// registry is the parent of nothing (lease actors are spawned from the
	// root: protoactor's child set keeps a stopped child's PID, and through
	// it the whole actor, in its backing array) but the supervisor of all.
	registry *actor.PID
	stopped  chan struct{} // closed when every lease actor has stopped
	regDone  chan struct{} // closed when the registry has stopped
	backDone chan struct{} // closed when the backend actor has stopped
	leases   sync.WaitGroup
	backWG   sync.WaitGroup // the backend actor's goroutines
	tellWG   sync.WaitGroup // the registry's goroutines telling lease actors of Shutdown

}

// Start spawns the actors of one Manager in root's system; newLease makes
// the lease actor of an entry (package actors' lease actor).
func Start(root *actor.RootContext, cfg *Config, newLease func(*Engine, *Entry) actor.Actor) *Engine {
	cfg.instance = newInstance()
	cfg.now = cfg.clock().Now
	cfg.info = cfg.Backend.Info()
	cfg.queue = cfg.info.Queue
	cfg.handOffNotices = cfg.info.HandOffNotices && cfg.queue
	e := &Engine{root: root, cfg: cfg,
		stopped: make(chan struct{}), regDone: make(chan struct{}), backDone: make(chan struct{})}
	props := func(producer actor.Producer) *actor.Props {
		// Stopped, not restarted, on a panic (the guardian is their
		// supervisor: they are spawned from the root): a restarted backend
		// actor would orphan its workers, a restarted registry its Close.
		return actor.PropsFromProducer(producer, actor.WithDispatcher(dispatcher), actor.WithMailbox(newMailbox),
			actor.WithSupervisor(stopOnFailure), actor.WithGuardian(stopOnFailure))
	}
	// The router first: the backend actor's release watch may route a
	// notice as soon as it starts.
	e.router = newRouter(e.spawnLease)
	for range max(2, min(8, runtime.GOMAXPROCS(0))) {
		e.alarms = append(e.alarms, newAlarms(cfg.clock(), e.sendTo))
	}
	e.hub = root.Spawn(props(newHub))
	back := newBackendActor(cfg, root, e.notice, e.handOff, e.backDone, &e.backWG)
	e.back = back
	e.renewer = newRenewer(cfg.clock(), cfg.RenewBatchSize, cfg.RenewBatchDelay, back.renewBatch,
		func(en *entry, res *protocol.BackendResult) { e.sendTo(en, res) }, cfg.Metrics)
	back.renewed = e.renewer.answer
	e.backend = root.Spawn(props(func() actor.Actor { return back }))
	for i := range e.router.shards {
		// A Props per router shard, shared by its lease actors (Props per
		// actor would cost a tenth of a held lease's memory; one for all
		// would make every spawn wait for one lock): its producer, which
		// protoactor calls synchronously inside Spawn, takes the entry
		// from the shard, whose lock the spawner holds.
		s := &e.router.shards[i]
		s.props = props(func() actor.Actor { return newLease(e, s.spawning) })
	}
	e.registry = root.Spawn(props(func() actor.Actor { return &registry{e: e} }))
	return e
}

// spawnLease starts the lease actor of en (the router holds en's shard lock).
func (e *Engine) spawnLease(en *entry) *actor.PID {
	s := e.router.shard(en.key)
	s.spawning = en
	e.leases.Add(1)
	pid := e.root.Spawn(s.props)
	s.spawning = nil
	return pid
}

// alarmsFor is the alarm heap of key's holdings.
func (e *Engine) alarmsFor(key string) *alarms {
	return e.alarms[maphash.String(e.router.seed, key)%uint64(len(e.alarms))]
}

// Send routes a command to key's lease actor, spawning it when spawn is set.
// It reports false when there is no such actor (or, closing, none may be
// spawned); msg was not sent then.
func (e *Engine) Send(key string, msg any, spawn bool) bool {
	mode := routeWake
	if spawn {
		mode = routeSpawn
	}
	pid := e.router.route(key, mode)
	if pid == nil {
		return false
	}
	e.root.Send(pid, msg)
	return true
}

// sendTo sends msg to en's lease actor, waking it if it sleeps; nothing when
// en is no longer its key's entry (what msg was about has ended).
func (e *Engine) sendTo(en *entry, msg any) {
	if pid := e.router.routeTo(en, routeWake); pid != nil {
		e.root.Send(pid, msg)
	}
}

// sendLive sends msg to key's lease actor if one runs now: a notice, which a
// sleeping lease (held, nobody waiting) would ignore.
func (e *Engine) sendLive(key string, msg any) {
	if pid := e.router.route(key, routeLive); pid != nil {
		e.root.Send(pid, msg)
	}
}

// notice wakes the waiters of key, if it has a lease actor, and those of
// its holdings under a limit above 1 (groups.go).
func (e *Engine) notice(key string) {
	m := &protocol.ReleaseNotice{Key: key}
	e.sendLive(key, m)
	for _, route := range e.router.groups.routes(key) {
		e.sendLive(route, m)
	}
}

// handOff hands a grant the store made to one of this Manager's attempts to
// the key's lease actor. A key with no actor has no waiter: the notice is
// stale (see leaseActor.onHandOff).
func (e *Engine) handOff(h backend.HandOff) {
	if h.Owner != e.cfg.Owner {
		return // not ours: another Manager's address collided with ours
	}
	m := &protocol.HandOffNotice{HandOff: h}
	e.sendLive(h.Key, m)
	for _, route := range e.router.groups.routes(h.Key) {
		e.sendLive(route, m) // only the actor of h.Attempt takes it
	}
}

// Subscribe and Unsubscribe add and remove a subscriber of loss events.
func (e *Engine) Subscribe(s *lease.Sink)   { e.root.Send(e.hub, &protocol.Subscribe{Sink: s}) }
func (e *Engine) Unsubscribe(s *lease.Sink) { e.root.Send(e.hub, &protocol.Unsubscribe{Sink: s}) }

// Shutdown starts the end of the Manager's work (see messages.Shutdown).
// From now on a lease actor that stops before it has handled it ends its
// holding as released, not lost.
func (e *Engine) Shutdown(m *messages.Shutdown) {
	e.cfg.closing.Store(true)
	e.root.Send(e.registry, m)
}

// Admit waits, under ctx, while renewals are answered late (see pressure): a new
// acquire must not take the time the leases already held need.
func (e *Engine) Admit(ctx context.Context) error {
	return e.renewer.pressure.admit(ctx, e.cfg.clock())
}

// Sweep retires the lease actors idle for a whole sweep period and puts to
// sleep those of leases held with nothing to do (see router.sweep). The
// registry runs it every idleSweep.
func (e *Engine) Sweep() {
	for _, pid := range e.router.sweep() {
		e.root.Stop(pid)
	}
}

// Asleep reports whether key's lease sleeps: held, with no actor.
func (e *Engine) Asleep(key string) bool {
	s := e.router.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.m[key]
	return en != nil && en.pid == nil
}

// Stopped is closed once every lease actor has stopped.
func (e *Engine) Stopped() <-chan struct{} { return e.stopped }

// Holdings lists the holdings of this Manager now, in no particular order.
func (e *Engine) Holdings() []*lease.Holding { return e.router.holdings() }

// Stop stops every actor (after a Shutdown, there is nothing left to
// release) and waits for them and their goroutines. The waiting is done here,
// never in an actor's Receive: with the caller-runs dispatcher, an actor that
// blocked could be blocking the very goroutine that runs what it waits for.
func (e *Engine) Stop() {
	e.router.closing.Store(true)
	e.router.stopped.Store(true) // nothing spawns or wakes from now on
	forEachPID(e.router.all(false), e.root.Stop)
	e.leases.Wait() // quick: lease actors never block, and after Shutdown they hold nothing
	close(e.stopped)
	e.root.Stop(e.registry)
	<-e.regDone
	e.tellWG.Wait()
	for _, s := range e.alarms {
		s.stop()
	}
	e.renewer.stop()
	e.root.Stop(e.backend) // cancels the calls in flight
	<-e.backDone
	e.backWG.Wait()
	e.root.Stop(e.hub) // closes the subscriptions
}

// stopOnFailure stops a panicking actor rather than restarting it with empty
// state: a lease actor's Stopping handler answers its callers and ends its
// holding.
var stopOnFailure = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
