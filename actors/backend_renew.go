package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

// renewBatch (the backend actor's side) makes the renewals of one batch off
// the mailbox, in one RenewBatch round trip when the backend has it, and
// answers every lease actor. The round trip may take as long as the latest
// deadline in the batch: a lease whose own deadline passes first is lost by
// its own alarm meanwhile. A batch that fails as a whole fails every renewal
// in it, which each lease actor retries until its own local deadline, exactly
// as after a single failed renewal.
func (a *backendActor) renewBatch(batch []messages.Renewal) {
	if a.batch == nil || len(batch) == 1 { // a lone renewal needs no batch
		for _, n := range batch {
			m := &messages.BackendCall{Seq: n.Seq, Deadline: n.Deadline, ReplyTo: n.ReplyTo,
				Call: backend.Call{Op: backend.OpRenew, Renew: n.Renew}}
			if a.queue != nil {
				a.queue.add(m) // with the calls ready now, as any call
			} else {
				a.run(m)
			}
		}
		return
	}
	calls := a.callsCtx()
	a.exec(func() {
		deadline := batch[0].Deadline
		reqs := make([]backend.RenewRequest, len(batch))
		for i, n := range batch {
			reqs[i] = n.Renew
			if n.Deadline.After(deadline) {
				deadline = n.Deadline
			}
		}
		ctx, cancel := context.WithDeadline(calls, deadline)
		start := time.Now()
		results, err := renewBatch(ctx, a.batch, reqs)
		cancel()
		a.cfg.observe(opRenewBatch, start, err, nil)
		if err == nil && len(results) != len(batch) {
			err = fmt.Errorf("leasehold: backend answered %d renewals for a batch of %d", len(results), len(batch))
		}
		for i, n := range batch {
			res := messages.BackendResult{Seq: n.Seq, Op: backend.OpRenew, Err: err}
			if err == nil {
				res.Grant, res.Err = results[i].Grant, results[i].Err
			}
			a.root.Send(n.ReplyTo, &res)
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
