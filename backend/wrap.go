package backend

import (
	"context"
	"errors"
	"fmt"
)

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
	// Err that does not wrap ErrNotHeld fails the whole batch (as RenewBatch's
	// contract says).
	Call func(ctx context.Context, calls []Call, next func(context.Context, []Call))

	// Notify wraps each release announced to a WatchReleases callback. It
	// must not block; next delivers the key.
	Notify func(key string, next func(key string))

	// NonBlocking declares that Call and Notify never block nor wait on I/O.
	// Only then does Wrap keep Info.Inline: the engine calls an Inline
	// backend on its own actors, so a middleware that waits (a log sink, a
	// metrics push, an injected delay) would stall every lease of the
	// Manager. Without it the wrapped memory backend is called on
	// goroutines, like any other store.
	NonBlocking bool
}

// Wrap returns a Backend that sends every call through mw to inner. Its Info
// is inner's, so the engine finds the same abilities through the wrapper,
// except that Inline is kept only when mw.NonBlocking is set. Inspect, List
// and Revoke are operator calls, not lease traffic, and hand-off notices are
// not lease traffic until the engine picks the hand-off up (a call through
// Call): they pass straight through, as does Shard. Close closes inner.
func Wrap(inner Backend, mw Middleware) Backend {
	return &wrapped{inner: inner, mw: mw}
}

type wrapped struct {
	inner Backend
	mw    Middleware
}

func (w *wrapped) Info() Info {
	info := w.inner.Info()
	info.Inline = info.Inline && w.mw.NonBlocking
	return info
}

func (w *wrapped) Close() error            { return w.inner.Close() }
func (w *wrapped) Shard(key string) string { return w.inner.Shard(key) }

// round sends calls through the middleware to next.
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

// RenewBatch goes through Middleware.Call as OpRenew calls and makes one
// RenewBatch round trip on the inner backend.
func (w *wrapped) RenewBatch(ctx context.Context, rs []RenewRequest) ([]RenewResult, error) {
	calls := make([]Call, len(rs))
	for i, r := range rs {
		calls[i] = Call{Op: OpRenew, Renew: r}
	}
	w.round(ctx, calls, func(ctx context.Context, calls []Call) {
		reqs := make([]RenewRequest, len(calls))
		for i := range calls {
			reqs[i] = calls[i].Renew
		}
		res, err := w.inner.RenewBatch(ctx, reqs)
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

func (w *wrapped) Batch(ctx context.Context, calls []Call) {
	w.round(ctx, calls, w.inner.Batch)
}

func (w *wrapped) WatchReleases(ctx context.Context, fn func(key string)) error {
	if notify := w.mw.Notify; notify != nil {
		return w.inner.WatchReleases(ctx, func(key string) { notify(key, fn) })
	}
	return w.inner.WatchReleases(ctx, fn)
}

func (w *wrapped) WatchHandOffs(ctx context.Context, addr string, fn func(HandOff), ready func()) error {
	return w.inner.WatchHandOffs(ctx, addr, fn, ready)
}

func (w *wrapped) Holders(ctx context.Context, key string) ([]Holder, error) {
	return w.inner.Holders(ctx, key)
}

func (w *wrapped) Inspect(ctx context.Context, key string) (Holder, bool, error) {
	return w.inner.Inspect(ctx, key)
}

func (w *wrapped) List(ctx context.Context, prefix string, fn func(Holder) bool) error {
	return w.inner.List(ctx, prefix, fn)
}

func (w *wrapped) Revoke(ctx context.Context, key string, token uint64) (Holder, bool, error) {
	return w.inner.Revoke(ctx, key, token)
}
