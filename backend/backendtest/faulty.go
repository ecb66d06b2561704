package backendtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// ErrInjected is the error Faulty returns for the faults it injects.
var ErrInjected = errors.New("backendtest: injected fault")

// Faulty wraps a Backend, counting calls and injecting faults. The zero
// switches inject nothing. Its Info is the wrapped backend's without Inline
// (its faults block) and without Batches (it makes no Batch): the engine then
// sends every call on its own, each one counted and faulted here.
type Faulty struct {
	// Unsupported answers Batch, which Faulty's Info never declares.
	backend.Unsupported

	B backend.Backend

	Acquires, Renews, Releases atomic.Int64
	// ReleasesDone counts the releases that have returned: a later call
	// on the name cannot overtake them.
	ReleasesDone atomic.Int64
	// RenewBatches counts RenewBatch calls (their renewals count in Renews).
	RenewBatches atomic.Int64
	// Queued counts refusals that left the attempt in the store's waiter
	// queue (Grant.Queued).
	Queued atomic.Int64
	// QueuedAttempts counts the attempts the store has queued, each once
	// however often its polls are queued again: a test that starts a
	// waiter can wait for its entry without mistaking another waiter's
	// poll for it.
	QueuedAttempts atomic.Int64

	// FailRenew makes Renew fail (as if the backend were unreachable).
	FailRenew atomic.Bool
	// FailAfterRenew performs renewals, then reports an error: the store
	// keeps extending the holding while its owner hears only failures.
	FailAfterRenew atomic.Bool
	// BlockAcquire and BlockRelease make those calls wait until their
	// context ends, like a server that never answers; Blocked counts the
	// calls waiting so.
	BlockAcquire, BlockRelease atomic.Bool
	Blocked                    atomic.Int64
	// Stall makes every call wait until its context ends, the batches and
	// Inspect, List and Revoke included (counted in Blocked): a store behind
	// a black-holed link, for a backend that has no link (memory).
	Stall atomic.Bool
	// FailAcquire makes Acquire fail without reaching the store.
	FailAcquire atomic.Bool
	// FailAfterAcquire performs the acquire, then reports an error, as a
	// connection cut after the server's answer would.
	FailAfterAcquire atomic.Bool
	// FailRelease makes Release fail without releasing.
	FailRelease atomic.Bool
	// AcquireDelay delays every acquire (before the backend call) by this
	// many nanoseconds, ignoring the context, like a slow network.
	AcquireDelay atomic.Int64
	// ReleaseDelay delays every release by this many nanoseconds, or until
	// its context ends, like a server that does not answer.
	ReleaseDelay atomic.Int64

	granted sync.Map // key → the attempt of its latest grant
	queued  sync.Map // key and attempt → struct{}, once queued
	byOwner sync.Map // owner → *atomic.Int64, acquire calls
}

// queuedAttempt names an attempt queued on a key, for QueuedAttempts.
type queuedAttempt struct{ key, owner, attempt string }

// AcquiresBy is the number of acquire calls made for owner.
func (f *Faulty) AcquiresBy(owner string) int64 {
	if n, ok := f.byOwner.Load(owner); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// AttemptOf is the attempt identity of the latest grant of key through f, so
// that a test can act on a holding as its owner would (or as an operator
// with the owner's credentials would).
func (f *Faulty) AttemptOf(key string) string {
	a, _ := f.granted.Load(key)
	s, _ := a.(string)
	return s
}

// Wrap returns a Faulty around b, and the Backend to give to a Manager (the
// same Faulty). A Faulty always renews in batches (b's RenewBatch), so the
// engine's batching runs on every backend under test, and passes b's release
// announcements and hand-off notices through.
func Wrap(b backend.Backend) (*Faulty, backend.Backend) {
	f := &Faulty{B: b}
	return f, f
}

// WatchReleases passes the wrapped backend's notifications through.
func (f *Faulty) WatchReleases(ctx context.Context, fn func(string)) error {
	return f.B.WatchReleases(ctx, fn)
}

// WatchHandOffs passes the wrapped backend's hand-off notices through.
func (f *Faulty) WatchHandOffs(ctx context.Context, addr string, fn func(backend.HandOff), ready func()) error {
	return f.B.WatchHandOffs(ctx, addr, fn, ready)
}

// Calls is the total number of backend calls so far.
func (f *Faulty) Calls() int64 { return f.Acquires.Load() + f.Renews.Load() + f.Releases.Load() }

// Info is the wrapped backend's, without Inline and Batches (see Faulty).
func (f *Faulty) Info() backend.Info {
	info := f.B.Info()
	info.Inline, info.Batches = false, false
	return info
}

// Shard is the wrapped backend's.
func (f *Faulty) Shard(key string) string { return f.B.Shard(key) }

// Close does nothing: the wrapped backend belongs to the test.
func (f *Faulty) Close() error { return nil }

// Acquire counts, waits AcquireDelay, acquires (even if ctx ends meanwhile,
// like a request already on the wire) and may then fail (FailAfterAcquire).

func (f *Faulty) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	f.Acquires.Add(1)
	n, _ := f.byOwner.LoadOrStore(r.Owner, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if d := f.AcquireDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if f.BlockAcquire.Load() || f.Stall.Load() {
		return backend.Grant{}, f.block(ctx)
	}
	if f.FailAcquire.Load() {
		return backend.Grant{}, ErrInjected
	}
	g, err := f.B.Acquire(context.WithoutCancel(ctx), r)
	if err == nil && g.Acquired {
		f.granted.Store(r.Key, r.Attempt)
	}
	if err == nil && g.Queued {
		f.Queued.Add(1)
		if _, seen := f.queued.LoadOrStore(queuedAttempt{r.Key, r.Owner, r.Attempt}, struct{}{}); !seen {
			f.QueuedAttempts.Add(1)
		}
	}
	if err == nil && f.FailAfterAcquire.Load() {
		return backend.Grant{}, ErrInjected
	}
	return g, err
}

// Renew counts and may fail (FailRenew).
func (f *Faulty) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	f.Renews.Add(1)
	if f.Stall.Load() {
		return backend.Grant{}, f.block(ctx)
	}
	if f.FailRenew.Load() {
		return backend.Grant{}, ErrInjected
	}
	g, err := f.B.Renew(ctx, r)
	if err == nil && f.FailAfterRenew.Load() {
		return backend.Grant{}, ErrInjected
	}
	return g, err
}

// RenewBatch renews rs through b's RenewBatch; FailRenew fails the batch as a
// whole.
func (f *Faulty) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	f.RenewBatches.Add(1)
	f.Renews.Add(int64(len(rs)))
	if f.Stall.Load() {
		return nil, f.block(ctx)
	}
	if f.FailRenew.Load() {
		return nil, ErrInjected
	}
	out, err := f.B.RenewBatch(ctx, rs)
	if err != nil {
		return nil, err
	}
	if f.FailAfterRenew.Load() {
		return nil, ErrInjected
	}
	return out, nil
}

// Release counts, waits ReleaseDelay and may fail (FailRelease).
func (f *Faulty) Release(ctx context.Context, r backend.ReleaseRequest) error {
	f.Releases.Add(1)
	defer f.ReleasesDone.Add(1)
	if f.BlockRelease.Load() || f.Stall.Load() {
		return f.block(ctx)
	}
	if d := f.ReleaseDelay.Load(); d > 0 {
		select {
		case <-time.After(time.Duration(d)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.FailRelease.Load() {
		return ErrInjected
	}
	return f.B.Release(ctx, r)
}

// block waits for ctx to end, counted in Blocked.
func (f *Faulty) block(ctx context.Context) error {
	f.Blocked.Add(1)
	defer f.Blocked.Add(-1)
	<-ctx.Done()
	return ctx.Err()
}

// Inspect, List and Revoke pass through to the wrapped backend, unless Stall.
func (f *Faulty) Inspect(ctx context.Context, key string) (backend.Holder, bool, error) {
	if f.Stall.Load() {
		return backend.Holder{}, false, f.block(ctx)
	}
	return f.B.Inspect(ctx, key)
}

// Holders passes through (see Inspect).
func (f *Faulty) Holders(ctx context.Context, key string) ([]backend.Holder, error) {
	if f.Stall.Load() {
		return nil, f.block(ctx)
	}
	return f.B.Holders(ctx, key)
}

// List passes through (see Inspect).
func (f *Faulty) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	if f.Stall.Load() {
		return f.block(ctx)
	}
	return f.B.List(ctx, prefix, fn)
}

// Revoke passes through (see Inspect).
func (f *Faulty) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	if f.Stall.Load() {
		return backend.Holder{}, false, f.block(ctx)
	}
	return f.B.Revoke(ctx, key, token)
}

// Partition makes every call fail (true) or pass (false), as a network
// partition between this client and the store would.
func (f *Faulty) Partition(on bool) {
	f.FailAcquire.Store(on)
	f.FailRenew.Store(on)
	f.FailRelease.Store(on)
}
