package backend

import (
	"context"
	"errors"
	"fmt"
)

//go:generate go test . -run TestWrapCombosUpToDate -update-wrap

// Middleware is what Wrap adds around a Backend: metrics, logging, tracing,
// fault injection. Every field is optional.
type Middleware struct {
	// Call wraps every round trip to the store that carries lease traffic:
	// a single Acquire, Renew or Release comes as one Call, a RenewBatch as
	// one OpRenew Call per request, a Batch as its calls. next makes the
	// round trip on the wrapped backend and fills in each Call's Grant and
	// Err. Call may change requests before next and answers after it, or not
	// call next at all and answer every call itself (an Err, typically); it
	// must not change a Call's Op nor the length of calls. In a RenewBatch an
	// Err that does not wrap ErrNotHeld fails the whole batch (as the
	// BatchRenewer contract says).
	Call func(ctx context.Context, calls []Call, next func(context.Context, []Call))

	// Notify wraps each release announced to a WatchReleases callback (on a
	// ReleaseWatcher). It must not block; next delivers the key.
	Notify func(key string, next func(key string))

	// NonBlocking declares that Call and Notify never block nor wait on I/O.
	// Only then does Wrap keep an Immediate backend Immediate: the engine
	// calls an Immediate backend inline, on its own actors, so a
	// middleware that waits (a log sink, a metrics push, an injected delay)
	// would stall every lease of the Manager. Without it the wrapped memory
	// backend is called on goroutines, like any other store.
	NonBlocking bool
}

// Wrap returns a Backend that sends every call through mw to inner and
// implements exactly the optional capabilities inner implements
// (ReleaseWatcher, BatchRenewer, Batcher, Inspector, Lister, Revoker,
// HandOffWatcher), so
// that the engine finds the same fast paths through the wrapper. Immediate is
// kept only when mw.NonBlocking is set. Inspect, List and Revoke are operator
// calls, not lease traffic: they pass straight through. Close closes inner.
//
// Every wrapper is also a Sharder: it answers as inner does, or "" (one
// shard, as if it were none) when inner is not a Sharder.
func Wrap(inner Backend, mw Middleware) Backend {
	w := &wrapped{inner: inner, mw: mw}
	w.sharder, _ = inner.(Sharder)
	return wrapCombos[capabilitiesOf(inner, mw.NonBlocking)](w)
}

// The optional capabilities, as bits of a wrapCombos index.
const (
	capReleaseWatcher = 1 << iota
	capBatchRenewer
	capBatcher
	capInspector
	capLister
	capRevoker
	capImmediate
	capHandOffWatcher
	capCount = iota
)

func capabilitiesOf(b Backend, keepImmediate bool) int {
	var c int
	if _, ok := b.(ReleaseWatcher); ok {
		c |= capReleaseWatcher
	}
	if _, ok := b.(BatchRenewer); ok {
		c |= capBatchRenewer
	}
	if _, ok := b.(Batcher); ok {
		c |= capBatcher
	}
	if _, ok := b.(Inspector); ok {
		c |= capInspector
	}
	if _, ok := b.(Lister); ok {
		c |= capLister
	}
	if _, ok := b.(Revoker); ok {
		c |= capRevoker
	}
	if _, ok := b.(Immediate); ok && keepImmediate {
		c |= capImmediate
	}
	if _, ok := b.(HandOffWatcher); ok {
		c |= capHandOffWatcher
	}
	return c
}

// wrapped is the Backend part of every wrapper; the capability parts below
// are embedded by the combinations in wrap_combos.go.
type wrapped struct {
	inner   Backend
	mw      Middleware
	sharder Sharder // inner, when it is one
}

// Shard implements Sharder (see Wrap).
func (w *wrapped) Shard(key string) string {
	if w.sharder == nil {
		return ""
	}
	return w.sharder.Shard(key)
}

func (w *wrapped) round(ctx context.Context, calls []Call, next func(context.Context, []Call)) {
	if w.mw.Call == nil {
		next(ctx, calls)
		return
	}
	n := len(calls)
	w.mw.Call(ctx, calls, next)
	if len(calls) != n {
		panic(fmt.Sprintf("backend.Wrap: Middleware.Call changed the number of calls from %d to %d", n, len(calls)))
	}
}

// single makes each call with the inner backend's single-call methods.
func (w *wrapped) single(ctx context.Context, calls []Call) {
	for i := range calls {
		c := &calls[i]
		switch c.Op {
		case OpAcquire:
			c.Grant, c.Err = w.inner.Acquire(ctx, c.Acquire)
		case OpRenew:
			c.Grant, c.Err = w.inner.Renew(ctx, c.Renew)
		case OpRelease:
			c.Err = w.inner.Release(ctx, c.Release)
		default:
			c.Err = fmt.Errorf("%w: backend.Wrap: unknown op %v", ErrInvalidRequest, c.Op)
		}
	}
}

func (w *wrapped) Info() Info   { return w.inner.Info() }
func (w *wrapped) Close() error { return w.inner.Close() }

func (w *wrapped) Acquire(ctx context.Context, r AcquireRequest) (Grant, error) {
	calls := []Call{{Op: OpAcquire, Acquire: r}}
	w.round(ctx, calls, w.single)
	return calls[0].Grant, calls[0].Err
}

func (w *wrapped) Renew(ctx context.Context, r RenewRequest) (Grant, error) {
	calls := []Call{{Op: OpRenew, Renew: r}}
	w.round(ctx, calls, w.single)
	return calls[0].Grant, calls[0].Err
}

func (w *wrapped) Release(ctx context.Context, r ReleaseRequest) error {
	calls := []Call{{Op: OpRelease, Release: r}}
	w.round(ctx, calls, w.single)
	return calls[0].Err
}

type watcherPart struct{ w *wrapped }

func (p watcherPart) WatchReleases(ctx context.Context, fn func(key string)) error {
	inner := p.w.inner.(ReleaseWatcher)
	if notify := p.w.mw.Notify; notify != nil {
		return inner.WatchReleases(ctx, func(key string) { notify(key, fn) })
	}
	return inner.WatchReleases(ctx, fn)
}

type batchRenewerPart struct{ w *wrapped }

// RenewBatch goes through Middleware.Call as OpRenew calls and makes one
// RenewBatch round trip on the inner backend.
func (p batchRenewerPart) RenewBatch(ctx context.Context, rs []RenewRequest) ([]RenewResult, error) {
	calls := make([]Call, len(rs))
	for i, r := range rs {
		calls[i] = Call{Op: OpRenew, Renew: r}
	}
	p.w.round(ctx, calls, func(ctx context.Context, calls []Call) {
		reqs := make([]RenewRequest, len(calls))
		for i := range calls {
			reqs[i] = calls[i].Renew
		}
		res, err := p.w.inner.(BatchRenewer).RenewBatch(ctx, reqs)
		if err == nil && len(res) != len(calls) {
			err = fmt.Errorf("backend.Wrap: RenewBatch answered %d of %d requests", len(res), len(calls))
		}
		for i := range calls {
			if err != nil {
				calls[i].Grant, calls[i].Err = Grant{}, err
			} else {
				calls[i].Grant, calls[i].Err = res[i].Grant, res[i].Err
			}
		}
	})
	out := make([]RenewResult, len(calls))
	for i, c := range calls {
		if c.Err != nil && !errors.Is(c.Err, ErrNotHeld) {
			return nil, c.Err // the batch as a whole could not be confirmed
		}
		out[i] = RenewResult{Grant: c.Grant, Err: c.Err}
	}
	return out, nil
}

type batcherPart struct{ w *wrapped }

func (p batcherPart) Batch(ctx context.Context, calls []Call) {
	p.w.round(ctx, calls, p.w.inner.(Batcher).Batch)
}

type inspectorPart struct{ w *wrapped }

func (p inspectorPart) Inspect(ctx context.Context, key string) (Holding, bool, error) {
	return p.w.inner.(Inspector).Inspect(ctx, key)
}

type listerPart struct{ w *wrapped }

func (p listerPart) List(ctx context.Context, prefix string, fn func(Holding) bool) error {
	return p.w.inner.(Lister).List(ctx, prefix, fn)
}

type revokerPart struct{ w *wrapped }

func (p revokerPart) Revoke(ctx context.Context, key string, token uint64) (Holding, bool, error) {
	return p.w.inner.(Revoker).Revoke(ctx, key, token)
}

// handOffPart passes hand-off notices straight through: they are not lease
// traffic of this process until the engine picks the hand-off up, which is
// a call through Middleware.Call.
type handOffPart struct{ w *wrapped }

func (p handOffPart) WatchHandOffs(ctx context.Context, addr string, fn func(HandOff), ready func()) error {
	return p.w.inner.(HandOffWatcher).WatchHandOffs(ctx, addr, fn, ready)
}

type immediatePart struct{}

func (immediatePart) Immediate() {}
