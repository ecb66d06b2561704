package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/protocol"
)

// renewBatch makes the renewals of one of the renewer's batches, one round
// trip per shard of a Sharded backend (shardGroups), each on a call worker
// (exec), and hands each shard's answers to the renewer when its round trip
// returns. A round trip may take as long as the latest deadline among its
// renewals: a lease whose own deadline passes first is lost by its own alarm
// meanwhile; hence the split, since one shard that stops answering would
// otherwise hold back every lease of the batch that long. A round trip that
// fails as a whole fails every renewal in it, which each lease actor retries
// until its own local deadline, exactly as after a single failed renewal.
//
// The renewer calls it from its own goroutine, not through the mailbox: the
// backend actor's state it reads (the calls context, the workers) is safe
// to share, and a message would add a hand-off per batch.
func (a *backendActor) renewBatch(batch []sentRenewal) {
	for _, group := range a.shardGroups(batch) {
		a.renewGroup(group)
	}
}

// shardGroups splits batch by shard, each group in the batch's order (the
// whole batch when it is all on one shard, as always without shards).
func (a *backendActor) shardGroups(batch []sentRenewal) [][]sentRenewal {
	if !a.sharded || len(batch) == 1 {
		return [][]sentRenewal{batch}
	}
	shards := make([]string, len(batch))
	one := true
	for i, n := range batch {
		shards[i] = a.shard(n.Renew.Key)
		one = one && shards[i] == shards[0]
	}
	if one {
		return [][]sentRenewal{batch}
	}
	var (
		groups [][]sentRenewal
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

// renewGroup makes the renewals of batch, all on one shard, in one round trip
// (a lone renewal as a Renew: it needs no batch).
func (a *backendActor) renewGroup(batch []sentRenewal) {
	calls := a.callsCtx()
	a.exec(func() {
		if batch = a.dropExpired(batch); len(batch) == 0 {
			return
		}
		if len(batch) == 1 {
			n := &batch[0]
			res := perform(a.cfg, calls, false, &protocol.BackendCall{Seq: n.Seq, Deadline: n.Deadline,
				Call: backend.Call{Op: backend.OpRenew, Renew: n.Renew}})
			a.renewed(batch, []backend.RenewResult{{Grant: res.Grant, Err: res.Err}}, nil)
			return
		}
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
		a.renewed(batch, results, err)
	})
}

// dropExpired answers at once, as failed, the renewals of batch whose local
// deadline passed while they waited for a worker (their holdings are lost
// whatever the store would say), and returns the others: under overload the
// round trips go to the leases that can still be kept, rather than to the
// renewals queued longest, which would all come too late.
func (a *backendActor) dropExpired(batch []sentRenewal) []sentRenewal {
	now := a.cfg.clock().Now()
	i := slices.IndexFunc(batch, func(s sentRenewal) bool { return !now.Before(s.Deadline) })
	if i < 0 {
		return batch
	}
	var live, gone []sentRenewal
	for _, s := range batch {
		if now.Before(s.Deadline) {
			live = append(live, s)
		} else {
			gone = append(gone, s)
		}
	}
	a.renewed(gone, nil, context.DeadlineExceeded)
	return live
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
