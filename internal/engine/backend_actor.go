package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// releaseTimeout bounds every release: releases run detached from whoever
// asked for them (a caller of Lease.Release, a loss, an abandoned grant, an
// ambiguous acquire, Close), so this is their only bound besides Close's
// context. It also bounds a batch of calls.
const releaseTimeout = 10 * time.Second

// backendActor owns the Backend: it makes the calls off its mailbox, on a few
// long-lived workers (a goroutine of its own for a call when all are busy),
// coalesces the calls that are ready together into one round trip on a
// backend whose Info says Batches (coalesce.go), makes the renewer's batches
// (renewer.go), never mixing the shards of a Sharded backend in one round
// trip, and keeps the one release watch. (Lease actors call an Inline backend
// themselves, except for the renewer's batches, which come here whatever the
// backend.) Stopping cancels every call in flight and
// Engine.Stop waits for it, so nothing outlives the Manager.
type backendActor struct {
	cfg     *Config
	root    *actor.RootContext
	notice  func(key string)        // wakes the waiters of key
	handOff func(h backend.HandOff) // gives a hand-off to key's lease actor
	done    chan struct{}           // closed when stopped
	inline  bool

	base   context.Context // ends when the actor stops
	cancel context.CancelFunc
	// calls bounds every call: until Shutdown it is base; Shutdown cancels
	// the calls in flight and makes the following ones run under Close's
	// context (see messages.Shutdown). Workers read it under mu.
	mu          sync.Mutex
	calls       context.Context
	cancelCalls context.CancelFunc

	// renewed hands the answers of a renewal batch to the renewer.
	renewed func(batch []sentRenewal, results []backend.RenewResult, err error)

	sem  chan struct{}   // bounds calls in flight (MaxInFlight)
	work chan func()     // to the call workers (nil for an Inline backend)
	wg   *sync.WaitGroup // its goroutines; Engine.Stop waits for them

	// queues, when the backend batches, get the calls ready together
	// through a coalescer per shard (coalesce.go), made on the mailbox as
	// shards appear: a shard that stops answering holds back only its own.
	queues  map[string]*coalescer
	sharded bool // Info.Sharded: ask the backend for each key's shard

	// releasesWatched is true while the backend announces releases
	// (waiters poll less often then); handOffsWatched while the store's
	// hand-off notices to this Manager are watched (queued waiters then
	// poll only as a fallback). Each is written by its watch alone.
	releasesWatched, handOffsWatched atomic.Bool
}

func newBackendActor(cfg *Config, root *actor.RootContext, notice func(string), handOff func(backend.HandOff), done chan struct{}, wg *sync.WaitGroup) *backendActor {
	inline := cfg.info.Inline
	n := cfg.MaxInFlight
	if n <= 0 {
		n = 256
	}
	base, cancel := context.WithCancel(context.Background())
	calls, cancelCalls := context.WithCancel(base)
	a := &backendActor{cfg: cfg, root: root, notice: notice, handOff: handOff, done: done, wg: wg, inline: inline,
		base: base, cancel: cancel, calls: calls, cancelCalls: cancelCalls, sem: make(chan struct{}, n)}
	a.sharded = cfg.info.Sharded
	// Made here, not at Started: the renewer sends to it from its own
	// goroutine.
	if inline {
		a.work = make(chan func(), inlineQueue)
	} else {
		a.work = make(chan func())
	}
	if !inline && cfg.info.Batches {
		a.queues = map[string]*coalescer{}
	}
	return a
}

// shard is the shard of key ("" for a backend without shards).
func (a *backendActor) shard(key string) string {
	if !a.sharded {
		return ""
	}
	return a.cfg.Backend.Shard(key)
}

// send makes the call m, with the calls ready at the same moment on the same
// shard when the backend batches. On the mailbox only.
func (a *backendActor) send(m *protocol.BackendCall) {
	if a.queues == nil {
		a.run(m)
		return
	}
	s := a.shard(callKey(&m.Call))
	q := a.queues[s]
	if q == nil {
		q = newCoalescer(a)
		a.queues[s] = q
	}
	q.add(m)
}

// callKey is the key c is about.
func callKey(c *backend.Call) string {
	switch c.Op {
	case backend.OpAcquire:
		return c.Acquire.Key
	case backend.OpRenew:
		return c.Renew.Key
	}
	return c.Release.Key
}

func (a *backendActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.startWorkers()
		if a.cfg.info.AnnouncesReleases {
			a.releasesWatched.Store(true)
			a.wg.Go(func() {
				err := a.cfg.Backend.WatchReleases(a.base, a.notice)
				a.releasesWatched.Store(false)
				switch {
				case a.base.Err() != nil:
				case errors.Is(err, errors.ErrUnsupported): // switched off: waiters poll
				default:
					a.cfg.Logger.Warn("leasehold: release notifications stopped; waiters poll", "err", err)
				}
			})
		}
		if a.cfg.handOffNotices {
			a.wg.Go(func() {
				err := a.cfg.Backend.WatchHandOffs(a.base, a.cfg.address(), a.handOff, func() { a.handOffsWatched.Store(true) })
				a.handOffsWatched.Store(false)
				switch {
				case a.base.Err() != nil:
				case errors.Is(err, errors.ErrUnsupported): // switched off: queued waiters poll
				default:
					a.cfg.Logger.Warn("leasehold: hand-off notices stopped; queued waiters poll", "err", err)
				}
			})
		}
	case *protocol.BackendCall:
		a.send(m)
	case *messages.Shutdown:
		a.onShutdown(m)
	case *actor.Stopping:
		a.mu.Lock()
		a.cancelCalls()
		a.mu.Unlock()
		a.cancel()
		if a.work != nil {
			close(a.work)
		}
	case *actor.Stopped:
		close(a.done)
	}
}

// callsCtx is the context every call starts under now.
func (a *backendActor) callsCtx() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// onShutdown cancels every call in flight (Close must not wait on a call that
// blocks until its context ends) and runs the calls that follow, the
// releases Shutdown makes, under Close's context.
func (a *backendActor) onShutdown(m *messages.Shutdown) {
	closing := m.Ctx
	if closing == nil {
		closing = context.Background()
	}
	ctx, cancel := context.WithCancel(a.base)
	stop := context.AfterFunc(closing, cancel)
	a.mu.Lock()
	a.cancelCalls()
	a.calls, a.cancelCalls = ctx, func() { stop(); cancel() }
	a.mu.Unlock()
}

// run makes one call off the mailbox and answers it.
func (a *backendActor) run(m *protocol.BackendCall) {
	calls := a.callsCtx()
	a.exec(func() { a.reply(m, perform(a.cfg, calls, false, m)) })
}

// reply sends res to the lease actor that asked.
func (a *backendActor) reply(m *protocol.BackendCall, res protocol.BackendResult) {
	if m.ReplyTo != nil {
		a.root.Send(m.ReplyTo, &res)
	}
}

// callWorkers is how many long-lived goroutines make backend calls. A call on
// a fresh goroutine grows its stack through the client library every time;
// measured on Redis, that stack copying cost more than the engine's messages.
const callWorkers = 16

// An Inline backend (memory) never waits, so more goroutines than cores
// only contend for its locks and the renewer's: its calls (the renewer's
// batches) queue, up to inlineQueue of them, for one worker per core. Under
// a renewal load beyond the cores, a goroutine per batch had them fight for
// those locks until throughput collapsed and held leases were lost in bulk.
const inlineQueue = 1 << 12

func (a *backendActor) startWorkers() {
	n := callWorkers
	if a.inline {
		n = runtime.GOMAXPROCS(0)
	}
	for range n {
		a.wg.Go(func() {
			for fn := range a.work {
				a.bounded(fn)
			}
		})
	}
}

// exec runs fn (one call, or one batch) off the mailbox: on an idle worker
// (for an Inline backend, queued for one), or on a goroutine of its own when
// every worker is busy (the queue full), never more than MaxInFlight at once
// (goroutines, not the mailbox, wait for a slot).
func (a *backendActor) exec(fn func()) {
	select {
	case a.work <- fn:
	default:
		a.wg.Go(func() { a.bounded(fn) })
	}
}

// bounded runs fn in one of the MaxInFlight slots.
func (a *backendActor) bounded(fn func()) {
	select {
	case a.sem <- struct{}{}:
		defer func() { <-a.sem }()
	case <-a.base.Done(): // stopping: the call fails fast on its cancelled context
	}
	fn()
}

// perform makes the backend call m asks for and returns its result. Calls are
// bounded by base (the backend actor's calls context) as well as by the
// requester's context or deadline; Inline backends return at once, so
// their calls skip that bookkeeping.
func perform(cfg *Config, base context.Context, immediate bool, m *protocol.BackendCall) (res protocol.BackendResult) {
	b := cfg.Backend
	c := &m.Call
	res = protocol.BackendResult{Seq: m.Seq, Op: c.Op}
	// A panicking backend is a bug, but not one that may take the process
	// down or leave a lease actor without an answer: it becomes a failed call
	// (an acquire is then cleaned up with a release, a renewal retried).
	defer func() {
		if r := recover(); r != nil {
			res.Grant, res.Err = backend.Grant{}, fmt.Errorf("%w: %v", ErrBackendPanic, r)
		}
	}()
	start := time.Now()
	ctx, done := callContext(cfg, base, immediate, m, start)
	defer done()
	switch c.Op {
	case backend.OpAcquire:
		res.Grant, res.Err = b.Acquire(ctx, c.Acquire)
		cfg.observe(opAcquire, start, res.Err, m.Ctx)
	case backend.OpRenew:
		res.Grant, res.Err = b.Renew(ctx, c.Renew)
		cfg.observe(opRenew, start, res.Err, nil)
	case backend.OpRelease:
		res.Err = b.Release(ctx, c.Release)
		cfg.observe(opRelease, start, res.Err, nil)
	default:
		panic("leasehold: not a backend call: " + c.Op.String())
	}
	return res
}

// callContext bounds one call starting now: an acquire by its caller's
// context, a renewal by the lease's local deadline, a release by
// releaseTimeout (cfg.releases); all of them by base. Inline backends never
// wait, so their calls skip it.
func callContext(cfg *Config, base context.Context, immediate bool, m *protocol.BackendCall, now time.Time) (context.Context, func()) {
	if immediate {
		if m.Ctx != nil {
			return m.Ctx, func() {}
		}
		return base, func() {}
	}
	switch m.Call.Op {
	case backend.OpAcquire:
		if m.Ctx.Done() == nil {
			// The caller never gives up: base alone ends the call. One
			// context where the general case takes six allocations.
			return &boundByBase{Context: base, caller: m.Ctx}, func() {}
		}
		ctx, cancel := context.WithCancel(m.Ctx)
		stop := context.AfterFunc(base, cancel)
		return ctx, func() { stop(); cancel() }
	case backend.OpRenew:
		return context.WithDeadline(base, m.Deadline)
	}
	return cfg.releases.bound(base, now), func() {}
}

// releaseShare is how long releases that start one after another share one
// bounding context: each is bounded by releaseTimeout to releaseTimeout +
// releaseShare, and a release costs no timer and no context of its own
// (those were six allocations and a timer started and stopped per release).
const releaseShare = 100 * time.Millisecond

// releaseBounds hands out the shared bounding contexts of releases.
type releaseBounds struct {
	mu    sync.Mutex
	base  context.Context
	ctx   context.Context
	until time.Time // ctx's deadline
	// cancel is never called: releases may still run under ctx, whose
	// deadline (or base's end) frees it.
	cancel context.CancelFunc
}

// bound is the bounding context of a release under base that starts at now.
func (s *releaseBounds) bound(base context.Context, now time.Time) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil || s.base != base || s.until.Before(now.Add(releaseTimeout)) {
		s.base, s.until = base, now.Add(releaseTimeout+releaseShare)
		s.ctx, s.cancel = context.WithDeadline(base, s.until)
	}
	return s.ctx
}

// boundByBase is the context of a call whose caller's context never ends:
// it ends with base (the embedded Context, whose cancellation the contexts
// derived from it join directly) and carries the caller's values and
// deadline, as a cancellable child of the caller's context would.
type boundByBase struct {
	context.Context // base
	caller          context.Context
}

func (c *boundByBase) Deadline() (time.Time, bool) { return c.caller.Deadline() }

func (c *boundByBase) Value(key any) any {
	if v := c.caller.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// ErrBackendPanic wraps the value of a backend call that panicked.
var ErrBackendPanic = errors.New("leasehold: backend panicked")
