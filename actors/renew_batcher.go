package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

// renewBatcher, part of the backend actor, coalesces the renewals of many
// lease actors into few round trips. A renewal waits for a batch at most its
// own MaxDelay (and at most the batcher's delay); a full batch goes at once.
// Each lease still gets its own result, and a batch that fails as a whole
// fails every renewal in it, which each lease actor then retries until its own
// local deadline, exactly as after a single failed renewal.
type renewBatcher struct {
	b       backend.BatchRenewer
	size    int
	delay   time.Duration
	pending []*messages.BackendCall
	flushAt time.Time
	timers  *scheduler.TimerScheduler
	flushT  timer
}

func newRenewBatcher(b backend.BatchRenewer, size int, delay time.Duration) *renewBatcher {
	if size <= 0 {
		size = DefaultRenewBatchSize
	}
	if delay <= 0 {
		delay = DefaultRenewBatchDelay
	}
	return &renewBatcher{b: b, size: size, delay: delay}
}

func (r *renewBatcher) start(root *actor.RootContext) {
	r.timers = scheduler.NewTimerScheduler(root)
}

// add queues m; flush sends a batch.
func (r *renewBatcher) add(ctx actor.Context, m *messages.BackendCall, flush func([]*messages.BackendCall)) {
	r.pending = append(r.pending, m)
	if len(r.pending) >= r.size {
		r.send(flush)
		return
	}
	at := time.Now().Add(min(max(m.MaxDelay, 0), r.delay))
	if r.flushT.gen == 0 || at.Before(r.flushAt) {
		r.flushAt = at
		r.flushT.arm(r.timers, time.Until(at), ctx.Self(), func(g uint64) any { return &messages.FlushTick{Gen: g} })
	}
}

func (r *renewBatcher) tick(m *messages.FlushTick, flush func([]*messages.BackendCall)) {
	if r.flushT.fired(m.Gen) {
		r.send(flush)
	}
}

func (r *renewBatcher) send(flush func([]*messages.BackendCall)) {
	r.flushT.stop()
	batch := r.pending
	r.pending = nil
	if len(batch) > 0 {
		flush(batch)
	}
}

func (r *renewBatcher) stop() { r.flushT.stop() }

// flush renews a batch off the mailbox and answers every lease actor in it.
// The call may take as long as the latest deadline in the batch: a lease whose
// own deadline passes first is lost by its own timer meanwhile.
func (a *backendActor) flush(batch []*messages.BackendCall) {
	calls := a.callsCtx()
	a.exec(func() {
		if len(batch) == 1 { // a lone renewal needs no batch
			a.reply(batch[0], perform(a.cfg, calls, false, batch[0]))
			return
		}
		deadline := batch[0].Deadline
		reqs := make([]backend.RenewRequest, len(batch))
		for i, m := range batch {
			reqs[i] = m.Call.Renew
			if m.Deadline.After(deadline) {
				deadline = m.Deadline
			}
		}
		ctx, cancel := context.WithDeadline(calls, deadline)
		start := time.Now()
		results, err := renewBatch(ctx, a.batch.b, reqs)
		cancel()
		a.cfg.observe(opRenewBatch, start, err, nil)
		if err == nil && len(results) != len(batch) {
			err = fmt.Errorf("leasehold: backend answered %d renewals for a batch of %d", len(results), len(batch))
		}
		for i, m := range batch {
			res := messages.BackendResult{Seq: m.Seq, Op: backend.OpRenew, Err: err}
			if err == nil {
				res.Grant, res.Err = results[i].Grant, results[i].Err
			}
			a.reply(m, res)
		}
	})
}

// renewBatch calls b, turning a panic into a failed batch (see perform).
func renewBatch(ctx context.Context, b backend.BatchRenewer, reqs []backend.RenewRequest) (results []backend.RenewResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			results, err = nil, fmt.Errorf("%w: %v", ErrBackendPanic, r)
		}
	}()
	return b.RenewBatch(ctx, reqs)
}
