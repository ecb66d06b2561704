package redis

import (
	"context"
	"fmt"
	"slices"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
)

// Batch (Info says Batches) sends every call's script in one pipeline, so
// the whole batch costs one round trip (on Cluster one per node, in
// parallel, and the batch waits for every node it goes to: the engine
// sends each master's calls in batches of their own, by Shard), and each
// call gets the answer its single call would have given.
//
// A call that breaks the request limits gets an error wrapping
// backend.ErrInvalidRequest and is not sent. Calls on one name run in slice
// order (a pipeline runs in order on its connection, and all keys of one name
// live on one node). A fault of the round trip reaches every call it carried.
//
// With replica confirmation on, one WAIT at the end of the pipeline (per
// master on Cluster) confirms every acquire and renewal in it; a grant it does
// not confirm is released, all such releases again in one round trip, and
// answered as the single Acquire answers it (ErrNotConfirmed). A batch of releases alone sends
// no WAIT, as Release does not.
func (b *Backend) Batch(ctx context.Context, calls []backend.Call) {
	sc := make([]scriptCall, len(calls))
	run := make([]*scriptCall, 0, len(calls))
	names := make([]string, 0, len(calls)) // of the calls in run
	closed := b.closed()
	for i := range calls {
		c := &calls[i]
		c.Grant, c.Err = backend.Grant{}, nil
		var err error
		switch c.Op {
		case backend.OpAcquire:
			if err = c.Acquire.Validate(); err == nil {
				sc[i] = b.acquireCall(c.Acquire)
			}
		case backend.OpRenew:
			if err = c.Renew.Validate(); err == nil {
				sc[i] = b.renewCall(c.Renew)
			}
		case backend.OpRelease:
			if err = c.Release.Validate(); err == nil {
				sc[i] = b.releaseCall(c.Release)
			}
		default:
			err = fmt.Errorf("%w: unknown operation %v", backend.ErrInvalidRequest, c.Op)
		}
		if err == nil {
			err = closed
		}
		if err != nil {
			c.Err = err
			continue
		}
		run = append(run, &sc[i])
		names = append(names, callKey(c))
	}
	if len(run) == 0 {
		return
	}
	// The round trips answer a copy of the calls, since they may outlive
	// Batch when ctx ends first.
	answers := slices.Clone(calls)
	if err := b.roundTrip(ctx, names, func(ctx context.Context) {
		b.runBatch(ctx, run)
		b.answer(ctx, answers, sc)
	}); err != nil {
		for i := range calls {
			if calls[i].Err == nil {
				calls[i].Err = fmt.Errorf("redis: %v %q: %w", calls[i].Op, callKey(&calls[i]), err)
			}
		}
		return
	}
	for i := range calls {
		if calls[i].Err == nil {
			calls[i].Grant, calls[i].Err = answers[i].Grant, answers[i].Err
		}
	}
}

// answer reads the outcome of each call of calls that was sent (its script
// call in sc is set) into its Grant and Err, and gives back the grants too
// few replicas acknowledged.
func (b *Backend) answer(ctx context.Context, calls []backend.Call, sc []scriptCall) {
	var unconfirmed []int // acquires whose grants must be given back
	for i := range calls {
		c, s := &calls[i], &sc[i]
		if s.script == nil {
			continue
		}
		switch c.Op {
		case backend.OpAcquire:
			c.Grant, c.Err = b.acquireAnswer(ctx, c.Acquire, s)
			if c.Err == nil && b.unconfirmedGrant(c.Grant, s) {
				unconfirmed = append(unconfirmed, i)
			}
		case backend.OpRenew:
			c.Grant, c.Err = b.renewAnswer(ctx, c.Renew, s)
		case backend.OpRelease:
			c.Err = b.releaseAnswer(ctx, c.Release, s)
		}
	}
	if len(unconfirmed) > 0 {
		b.giveBack(ctx, calls, sc, unconfirmed)
	}
}

// callKey is the key c is about.
func callKey(c *backend.Call) string {
	switch c.Op {
	case backend.OpAcquire:
		return c.Acquire.Key
	case backend.OpRenew:
		return c.Renew.Key
	}
	return c.Release.Key
}

// giveBack releases the grants of the acquire calls at idx, which too few
// replicas acknowledged, in one round trip, and answers each call as Acquire
// does. A later call of the batch on the same name has run already; the
// release names the grant's own holding, so it cannot end anything newer.
func (b *Backend) giveBack(ctx context.Context, calls []backend.Call, sc []scriptCall, idx []int) {
	reqs := make([]backend.ReleaseRequest, len(idx))
	rel := make([]scriptCall, len(idx))
	run := make([]*scriptCall, len(idx))
	for j, i := range idx {
		r := calls[i].Acquire
		b.logUnconfirmed(ctx, r, calls[i].Grant.Token, sc[i].acked)
		reqs[j] = backend.ReleaseRequest{Key: r.Key, Owner: r.Owner, Attempt: r.Attempt, Token: calls[i].Grant.Token}
		rel[j] = b.releaseCall(reqs[j])
		run[j] = &rel[j]
	}
	b.runBatch(ctx, run)
	for j, i := range idx {
		calls[i].Grant, calls[i].Err = b.unconfirmedAnswer(calls[i].Acquire, sc[i].acked, b.releaseAnswer(ctx, reqs[j], &rel[j]))
	}
}

// runBatch runs calls in one pipeline on the caller's client (a ClusterClient
// splits it by node and follows MOVED) or, when a write in it needs replica
// confirmation, in one pipeline per primary with a WAIT at its end, the
// primaries in parallel. A lone call goes as the single call goes, without
// the pipeline's cost: the engine hands over what is ready, often one call.
func (b *Backend) runBatch(ctx context.Context, calls []*scriptCall) {
	if len(calls) == 1 {
		*calls[0] = b.runOne(ctx, *calls[0])
		return
	}
	confirm := func(c *scriptCall) bool { return c.confirm }
	if b.cfg.replicas == 0 || !slices.ContainsFunc(calls, confirm) {
		b.runPipeline(ctx, b.client, calls, false)
		return
	}
	groups := map[*goredis.Client][]*scriptCall{}
	var order []*goredis.Client
	for _, c := range calls {
		node, err := b.primary(ctx, c.keys[0])
		if err != nil {
			c.fail(ctx, err)
			continue
		}
		if _, ok := groups[node]; !ok {
			order = append(order, node)
		}
		groups[node] = append(groups[node], c)
	}
	if len(order) == 1 {
		b.runPipeline(ctx, order[0], groups[order[0]], true)
		return
	}
	var wg sync.WaitGroup
	for _, node := range order {
		wg.Go(func() { b.runPipeline(ctx, node, groups[node], true) })
	}
	wg.Wait()
}
