package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

// renewBatch (the backend actor's side) makes the renewals of one batch off
// the mailbox, one round trip per shard of a Sharded backend (shardGroups),
// and answers every lease actor of a shard when its round trip returns. Each
// round trip is one RenewBatch, and may take as long
// as the latest deadline among its renewals: a lease whose own deadline
// passes first is lost by its own alarm meanwhile; hence the split, since one
// shard that stops answering would otherwise hold back every lease of the
// batch that long. A round trip that fails as a whole fails every renewal in
// it, which each lease actor retries until its own local deadline, exactly
// as after a single failed renewal.
func (a *backendActor) renewBatch(batch []messages.Renewal) {
	for _, group := range a.shardGroups(batch) {
		a.renewGroup(group)
	}
}

// shardGroups splits batch by shard, each group in the batch's order (the
// whole batch when it is all on one shard, as always without shards).
func (a *backendActor) shardGroups(batch []messages.Renewal) [][]messages.Renewal {
	if !a.sharded || len(batch) == 1 {
		return [][]messages.Renewal{batch}
	}
	shards := make([]string, len(batch))
	one := true
	for i, n := range batch {
		shards[i] = a.shard(n.Renew.Key)
		one = one && shards[i] == shards[0]
	}
	if one {
		return [][]messages.Renewal{batch}
	}
	var (
		groups [][]messages.Renewal
		index  = map[string]int{}
	)
	for i, n := range batch {
		s := shards[i]
		g, ok := index[s]
		if !ok {
			g = len(groups)
			index[s] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], n)
	}
	return groups
}

// renewGroup makes the renewals of batch, all on one shard, in one round trip.
func (a *backendActor) renewGroup(batch []messages.Renewal) {
	if len(batch) == 1 { // a lone renewal needs no batch
		for _, n := range batch {
			// With the calls ready now, as any call.
			a.send(&messages.BackendCall{Seq: n.Seq, Deadline: n.Deadline, ReplyTo: n.ReplyTo,
				Call: backend.Call{Op: backend.OpRenew, Renew: n.Renew}})
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
		results, err := renewBatch(ctx, a.cfg.Backend, reqs)
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
func renewBatch(ctx context.Context, b backend.Backend, reqs []backend.RenewRequest) (results []backend.RenewResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			results, err = nil, fmt.Errorf("%w: %v", ErrBackendPanic, r)
		}
	}()
	return b.RenewBatch(ctx, reqs)
}
