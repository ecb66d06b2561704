package actors

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

// cleanupTimeout bounds a release the engine makes on its own (after a loss, an
// abandoned grant or an ambiguous acquire), which has no caller context.
const cleanupTimeout = 10 * time.Second

// backendActor owns the Backend. Calls run on their own goroutines (bounded by
// a semaphore that goroutines, not the mailbox, wait on), except for Immediate
// backends, which are called inline. Stopping cancels every call in flight and
// waits for its goroutine, so nothing outlives the Manager.
type backendActor struct {
	cfg      *Config
	registry *actor.PID
	root     *actor.RootContext
	inline   bool

	base   context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup
}

func newBackendActor(cfg *Config, registry *actor.PID, root *actor.RootContext) actor.Actor {
	_, inline := cfg.Backend.(backend.Immediate)
	n := cfg.MaxInFlight
	if n <= 0 {
		n = 256
	}
	base, cancel := context.WithCancel(context.Background())
	return &backendActor{cfg: cfg, registry: registry, root: root, inline: inline,
		base: base, cancel: cancel, sem: make(chan struct{}, n)}
}

func (a *backendActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if w, ok := a.cfg.Backend.(backend.ReleaseWatcher); ok {
			a.wg.Go(func() {
				err := w.WatchReleases(a.base, func(key string) {
					a.root.Send(a.registry, &messages.ReleaseNotice{Key: key})
				})
				if err != nil && a.base.Err() == nil {
					a.cfg.Logger.Warn("leasehold: release notifications stopped", "err", err)
				}
			})
		}
	case *messages.BackendAcquire:
		a.run(ctx, m.ReplyTo, func() any {
			callCtx, done := a.bound(m.Ctx)
			defer done()
			g, err := a.cfg.Backend.Acquire(callCtx, m.Req)
			return &messages.AcquireResult{Seq: m.Seq, Grant: g, Err: err}
		})
	case *messages.BackendRenew:
		a.run(ctx, m.ReplyTo, func() any {
			callCtx, done := context.WithDeadline(a.base, m.Deadline)
			defer done()
			g, err := a.cfg.Backend.Renew(callCtx, m.Req)
			return &messages.RenewResult{Seq: m.Seq, Grant: g, Err: err}
		})
	case *messages.BackendRelease:
		a.run(ctx, m.ReplyTo, func() any {
			callCtx, done := a.bound(m.Ctx)
			defer done()
			err := a.cfg.Backend.Release(callCtx, m.Req)
			return &messages.ReleaseResult{Seq: m.Seq, Err: err}
		})
	case *actor.Stopping:
		a.cancel()
		a.wg.Wait()
	}
}

// run performs call and sends its result to replyTo without blocking the
// mailbox.
func (a *backendActor) run(ctx actor.Context, replyTo *actor.PID, call func() any) {
	if a.inline {
		ctx.Send(replyTo, call())
		return
	}
	a.wg.Go(func() {
		select {
		case a.sem <- struct{}{}:
			defer func() { <-a.sem }()
		case <-a.base.Done(): // stopping: the call fails fast on its cancelled context
		}
		a.root.Send(replyTo, call())
	})
}

// bound derives a call context from the requester's ctx (nil: a cleanup with
// its own timeout) that also ends when the backend actor stops.
func (a *backendActor) bound(parent context.Context) (context.Context, func()) {
	if a.inline { // the call returns at once: nothing to bound
		if parent == nil {
			return a.base, func() {}
		}
		return parent, func() {}
	}
	if parent == nil {
		return context.WithTimeout(a.base, cleanupTimeout)
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(a.base, cancel)
	return ctx, func() { stop(); cancel() }
}
