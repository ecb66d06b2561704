package redis

import (
	"context"
	"sync"

	"github.com/leasehold/leasehold/backend"
)

// callSignals passes every call to Backend and tells the test what the
// engine's calls did, for states the test waits for:
//
//   - renewing ticks (without blocking: one pending tick is enough) when a
//     round trip with a renewal in it begins. A lease actor hands the
//     renewer its next renewal only once it has applied the answer to the
//     last one, so a lease's ExpiresAt changes only before such a tick.
//   - queued is closed once an acquire is answered Queued: the store has
//     put the attempt in the name's queue.
type callSignals struct {
	backend.Backend
	renewing chan struct{}
	queued   chan struct{}
	once     sync.Once
}

func signalCalls(b backend.Backend) *callSignals {
	return &callSignals{Backend: b, renewing: make(chan struct{}, 1), queued: make(chan struct{})}
}

func (w *callSignals) renewal() {
	select {
	case w.renewing <- struct{}{}:
	default:
	}
}

func (w *callSignals) answered(g backend.Grant) {
	if g.Queued {
		w.once.Do(func() { close(w.queued) })
	}
}

func (w *callSignals) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	g, err := w.Backend.Acquire(ctx, r)
	if err == nil {
		w.answered(g)
	}
	return g, err
}

func (w *callSignals) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	w.renewal()
	return w.Backend.Renew(ctx, r)
}

func (w *callSignals) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	w.renewal()
	return w.Backend.RenewBatch(ctx, rs)
}

func (w *callSignals) Batch(ctx context.Context, calls []backend.Call) {
	for _, c := range calls {
		if c.Op == backend.OpRenew {
			w.renewal()
			break
		}
	}
	w.Backend.Batch(ctx, calls)
	for _, c := range calls {
		if c.Op == backend.OpAcquire && c.Err == nil {
			w.answered(c.Grant)
		}
	}
}
