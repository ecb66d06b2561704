package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

// releaseTimeout bounds every release: releases run detached from whoever
// asked for them (a caller of Lease.Release, a loss, an abandoned grant, an
// ambiguous acquire, Close), so this is their only bound besides Close's
// context.
const releaseTimeout = 10 * time.Second

// backendActor owns the Backend: it makes the calls off its mailbox, on a few
// long-lived workers (a goroutine of its own for a call when all are busy; a
// semaphore that goroutines, not the mailbox, wait on bounds them), batches
// renewals for a BatchRenewer, and keeps the one release watch. (Lease actors
// call an Immediate backend themselves.) Stopping cancels every call in flight
// and waits for it, so nothing outlives the Manager.
type backendActor struct {
	cfg      *Config
	registry *actor.PID
	root     *actor.RootContext
	inline   bool

	base   context.Context // ends when the actor stops
	cancel context.CancelFunc
	// calls bounds every call: until Shutdown it is base; Shutdown cancels
	// the calls in flight and makes the following ones run under Close's
	// context (see messages.Shutdown).
	calls       context.Context
	cancelCalls context.CancelFunc
	sem         chan struct{}
	work        chan func() // to the call workers
	wg          sync.WaitGroup

	batch *renewBatcher // nil unless the backend renews in batches
}

func newBackendActor(cfg *Config, registry *actor.PID, root *actor.RootContext) actor.Actor {
	_, inline := cfg.Backend.(backend.Immediate)
	n := cfg.MaxInFlight
	if n <= 0 {
		n = 256
	}
	base, cancel := context.WithCancel(context.Background())
	calls, cancelCalls := context.WithCancel(base)
	a := &backendActor{cfg: cfg, registry: registry, root: root, inline: inline,
		base: base, cancel: cancel, calls: calls, cancelCalls: cancelCalls, sem: make(chan struct{}, n)}
	if br, ok := cfg.Backend.(backend.BatchRenewer); ok && !inline {
		a.batch = newRenewBatcher(br, cfg.RenewBatchSize, cfg.RenewBatchDelay)
	}
	return a
}

func (a *backendActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if !a.inline {
			a.startWorkers()
		}
		if a.batch != nil {
			a.batch.start(ctx, a.root)
		}
		if w, ok := a.cfg.Backend.(backend.ReleaseWatcher); ok {
			a.cfg.notifications.Store(true)
			a.wg.Go(func() {
				err := w.WatchReleases(a.base, func(key string) {
					a.root.Send(a.registry, &messages.ReleaseNotice{Key: key})
				})
				a.cfg.notifications.Store(false)
				switch {
				case a.base.Err() != nil:
				case errors.Is(err, errors.ErrUnsupported): // switched off: waiters poll
				default:
					a.cfg.Logger.Warn("leasehold: release notifications stopped; waiters poll", "err", err)
				}
			})
		}
	case *messages.BackendAcquire:
		a.run(m.ReplyTo, m)
	case *messages.BackendRenew:
		if a.batch != nil {
			a.batch.add(ctx, m, a.flush)
			return
		}
		a.run(m.ReplyTo, m)
	case *messages.FlushTick:
		if a.batch != nil {
			a.batch.tick(ctx, m, a.flush)
		}
	case *messages.BackendRelease:
		a.run(m.ReplyTo, m)
	case *messages.Shutdown:
		a.onShutdown(m)
	case *actor.Stopping:
		if a.batch != nil {
			a.batch.stop()
		}
		a.cancelCalls()
		a.cancel()
		if a.work != nil {
			close(a.work)
		}
		a.wg.Wait()
	}
}

// onShutdown cancels every call in flight (Close must not wait on a call that
// blocks until its context ends) and runs the calls that follow, the
// releases Shutdown makes, under Close's context.
func (a *backendActor) onShutdown(m *messages.Shutdown) {
	a.cancelCalls()
	closing := m.Ctx
	if closing == nil {
		closing = context.Background()
	}
	ctx, cancel := context.WithCancel(a.base)
	stop := context.AfterFunc(closing, cancel)
	a.calls, a.cancelCalls = ctx, func() { stop(); cancel() }
}

// run makes the call req asks for and sends its result to replyTo, off the
// mailbox. (Immediate backends never get here: lease actors call them.)
func (a *backendActor) run(replyTo *actor.PID, req any) {
	calls := a.calls
	a.exec(func() {
		res := perform(a.cfg, calls, false, req)
		if replyTo != nil {
			a.root.Send(replyTo, res)
		}
	})
}

// callWorkers is how many long-lived goroutines make backend calls. A call on
// a fresh goroutine grows its stack through the client library every time;
// measured on Redis, that stack copying cost more than the engine's messages.
const callWorkers = 16

func (a *backendActor) startWorkers() {
	a.work = make(chan func())
	for range callWorkers {
		a.wg.Go(func() {
			for fn := range a.work {
				fn()
			}
		})
	}
}

// exec runs fn (one call, or one batch) off the mailbox: on an idle worker, or
// on a goroutine of its own when every worker is busy, never more than
// MaxInFlight at once (goroutines, not the mailbox, wait for a slot).
func (a *backendActor) exec(fn func()) {
	bounded := func() {
		select {
		case a.sem <- struct{}{}:
			defer func() { <-a.sem }()
		case <-a.base.Done(): // stopping: the call fails fast on its cancelled context
		}
		fn()
	}
	select {
	case a.work <- bounded:
	default:
		a.wg.Go(bounded)
	}
}

// perform makes the backend call req asks for and returns its result message.
// Calls are bounded by base (the backend actor's calls context) as well as by
// the requester's context or deadline; immediate backends return at once, so
// their calls skip that bookkeeping.
func perform(cfg *Config, base context.Context, immediate bool, req any) (result any) {
	b := cfg.Backend
	// A panicking backend is a bug, but not one that may take the process
	// down or leave a lease actor without an answer: it becomes a failed call
	// (an acquire is then cleaned up with a release, a renewal retried).
	defer func() {
		if r := recover(); r != nil {
			result = failed(req, fmt.Errorf("%w: %v", ErrBackendPanic, r))
		}
	}()
	switch m := req.(type) {
	case *messages.BackendAcquire:
		ctx, done := bound(base, m.Ctx, immediate)
		defer done()
		start := time.Now()
		g, err := b.Acquire(ctx, m.Req)
		cfg.observe(opAcquire, start, err, m.Ctx)
		return &messages.AcquireResult{Seq: m.Seq, Grant: g, Err: err}
	case *messages.BackendRenew:
		ctx, done := base, context.CancelFunc(func() {})
		if !immediate {
			ctx, done = context.WithDeadline(base, m.Deadline)
		}
		defer done()
		start := time.Now()
		g, err := b.Renew(ctx, m.Req)
		cfg.observe(opRenew, start, err, nil)
		return &messages.RenewResult{Seq: m.Seq, Grant: g, Err: err}
	case *messages.BackendRelease:
		ctx, done := base, context.CancelFunc(func() {})
		if !immediate {
			ctx, done = context.WithTimeout(base, releaseTimeout)
		}
		defer done()
		start := time.Now()
		err := b.Release(ctx, m.Req)
		cfg.observe(opRelease, start, err, nil)
		return &messages.ReleaseResult{Seq: m.Seq, Err: err}
	}
	panic("leasehold: not a backend request")
}

// ErrBackendPanic wraps the value of a backend call that panicked.
var ErrBackendPanic = errors.New("leasehold: backend panicked")

// failed is the result of req failing with err.
func failed(req any, err error) any {
	switch m := req.(type) {
	case *messages.BackendAcquire:
		return &messages.AcquireResult{Seq: m.Seq, Err: err}
	case *messages.BackendRenew:
		return &messages.RenewResult{Seq: m.Seq, Err: err}
	case *messages.BackendRelease:
		return &messages.ReleaseResult{Seq: m.Seq, Err: err}
	}
	return nil
}

// bound derives a call context from the requester's ctx that also ends when
// base does.
func bound(base, parent context.Context, immediate bool) (context.Context, func()) {
	if immediate {
		return parent, func() {}
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(base, cancel)
	return ctx, func() { stop(); cancel() }
}
