package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
)

var _ backend.BatchRenewer = (*Backend)(nil)

// RenewBatch renews every request in one pipelined round trip (one per
// Cluster node) and returns one result per request, in order: a Grant, or an
// error wrapping backend.ErrNotHeld (the holding no longer exists),
// backend.ErrInvalidRequest (that request breaks the limits; it is not sent),
// ErrNotConfirmed (too few replicas acknowledged), a Redis error reply for
// that lease alone, or, on Cluster, the fault of the one node that could not
// answer (its renewals are unconfirmed; the other nodes' stand). A non-nil
// error means the batch as a whole could not be confirmed (a network fault on
// every node, the context ending); then no result is returned and the caller
// must treat every renewal as unconfirmed.
//
// With replica confirmation on a single node or Sentinel client, one WAIT at
// the end of the pipeline confirms the whole batch. On Cluster the requests
// are grouped by the master of their slot, and each group is pipelined to its
// master (with a WAIT of its own when confirmation is on), the groups in
// parallel: a dead master costs only its own renewals, and only the time its
// client takes to give up on it.
func (b *Backend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	if err := b.closed(); err != nil {
		return nil, err
	}
	results := make([]backend.RenewResult, len(rs))
	var sent []int // indexes in rs of the requests sent
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			results[i].Err = err
			continue
		}
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return results, nil
	}
	if cc, ok := b.client.(*goredis.ClusterClient); ok {
		return b.renewPerMaster(ctx, cc, rs, sent, results)
	}
	newPipe := func() (goredis.Pipeliner, error) { return b.client.Pipeline(), nil }
	if b.cfg.replicas > 0 {
		newPipe = func() (goredis.Pipeliner, error) { return b.primaryPipeline(ctx, b.LeaseKey(rs[sent[0]].Key)) }
	}
	cmds, acked, err := b.renewPipeline(ctx, newPipe, b.client, rs, sent)
	if err != nil {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
	}
	b.fillRenewals(results, rs, sent, cmds, acked)
	return results, nil
}

// fillRenewals turns the replies of the renewals sent into results.
func (b *Backend) fillRenewals(results []backend.RenewResult, rs []backend.RenewRequest, sent []int, cmds []*goredis.Cmd, acked int64) {
	for j, i := range sent {
		r := rs[i]
		g, holder, err := parseRenew(cmds[j].Val())
		switch {
		case cmds[j].Err() != nil:
			// A Redis error reply for this lease, or on Cluster the fault of
			// the one node that serves it.
			results[i].Err = fmt.Errorf("redis: renew %q: %w", r.Key, cmds[j].Err())
		case err != nil:
			results[i].Err = fmt.Errorf("redis: renew %q: %w", r.Key, err)
		case !g.Acquired:
			results[i].Err = fmt.Errorf("redis: renew %q: %w (holder %q)", r.Key, backend.ErrNotHeld, holder)
		case b.cfg.replicas > 0 && acked < int64(b.cfg.replicas):
			results[i].Err = fmt.Errorf("redis: renew %q: %w (%d of %d replicas)", r.Key, ErrNotConfirmed, acked, b.cfg.replicas)
		default:
			g.Token = r.Token
			results[i].Grant = g
		}
	}
}

// renewPipeline sends the renew script for each sent request, and WAIT when
// confirmation is on, in one pipeline made by newPipe. When the server does
// not know the script yet it loads it through loader and sends the batch again
// (renewal is idempotent). It returns an error when no renewal got an answer
// from Redis (a fault of the whole link), when WAIT failed, or when the
// pipeline or the script could not be had; a fault met by only some renewals
// (one Cluster node down) stays in their commands.
func (b *Backend) renewPipeline(ctx context.Context, newPipe func() (goredis.Pipeliner, error), loader goredis.Scripter,
	rs []backend.RenewRequest, sent []int) ([]*goredis.Cmd, int64, error) {
	for attempt := 0; ; attempt++ {
		p, err := newPipe()
		if err != nil {
			return nil, 0, err
		}
		cmds := make([]*goredis.Cmd, len(sent))
		for j, i := range sent {
			r := rs[i]
			cmds[j] = renewScript.EvalSha(ctx, p, []string{b.LeaseKey(r.Key)}, renewArgs(r)...)
		}
		var wait *goredis.Cmd
		if b.cfg.replicas > 0 {
			wait = p.Do(ctx, "WAIT", b.cfg.replicas, ttlMillis(b.cfg.confirmTimeout))
		}
		_, _ = p.Exec(ctx)

		noScript, answered := false, false
		var fault error
		for _, c := range cmds {
			err := c.Err()
			var reply goredis.Error
			switch {
			case err == nil:
				answered = true
			case goredis.HasErrorPrefix(err, "NOSCRIPT"):
				noScript, answered = true, true
			case errors.As(err, &reply):
				answered = true
			case fault == nil:
				fault = err
			}
		}
		if !answered {
			return nil, 0, fault // not an answer from Redis: nothing is confirmed
		}
		if noScript && attempt == 0 {
			// A ClusterClient loads it on every master.
			if err := renewScript.Load(ctx, loader).Err(); err != nil {
				return nil, 0, err
			}
			continue
		}
		var acked int64
		if wait != nil {
			if acked, err = wait.Int64(); err != nil {
				return nil, 0, fmt.Errorf("WAIT: %w", err)
			}
		}
		return cmds, acked, nil
	}
}

// renewPerMaster is RenewBatch on Cluster. The renewals are grouped by the
// master of their slot and each group is pipelined to that master, with its
// own WAIT when confirmation is on (one WAIT speaks only for the node and
// connection it runs on), the groups in parallel. A group whose master cannot
// be reached leaves its renewals unconfirmed and the others alone, and makes
// the client reload the slot map, so that the next batch finds the replica
// that took over. (A ClusterClient's own pipeline waits for every node, and
// retries a dead one for seconds, which would cost the live masters' leases.)
func (b *Backend) renewPerMaster(ctx context.Context, cc *goredis.ClusterClient, rs []backend.RenewRequest, sent []int, results []backend.RenewResult) ([]backend.RenewResult, error) {
	groups := map[*goredis.Client][]int{}
	var order []*goredis.Client
	for _, i := range sent {
		node, err := cc.MasterForKey(ctx, b.LeaseKey(rs[i].Key))
		if err != nil {
			results[i].Err = fmt.Errorf("redis: renew %q: %w", rs[i].Key, err)
			continue
		}
		if _, ok := groups[node]; !ok {
			order = append(order, node)
		}
		groups[node] = append(groups[node], i)
	}
	faults := make([]error, len(order))
	var wg sync.WaitGroup
	for g, node := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := groups[node]
			newPipe := func() (goredis.Pipeliner, error) { return node.Pipeline(), nil }
			cmds, acked, err := b.renewPipeline(ctx, newPipe, node, rs, idx)
			if err != nil {
				faults[g] = err
				b.reloadAfter(ctx, err)
				for _, i := range idx {
					results[i].Err = fmt.Errorf("redis: renew %q: %w", rs[i].Key, err)
				}
				return
			}
			for j := range cmds {
				b.reloadAfter(ctx, cmds[j].Err())
			}
			b.fillRenewals(results, rs, idx, cmds, acked)
		}()
	}
	wg.Wait()
	if len(order) > 0 && len(order) == countErrs(faults) {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), errors.Join(faults...))
	}
	return results, nil
}

func countErrs(errs []error) int {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	return n
}
