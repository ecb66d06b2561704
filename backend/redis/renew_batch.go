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
	calls := make([]scriptCall, len(rs))
	var sent []int // indexes in rs of the requests sent
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			results[i].Err = err
			continue
		}
		calls[i] = b.renewCall(r)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return results, nil
	}
	if cc, ok := b.client.(*goredis.ClusterClient); ok {
		return b.renewPerMaster(ctx, cc, rs, calls, sent, results)
	}
	var via pipeClient = b.client
	if b.cfg.replicas > 0 {
		node, err := b.primary(ctx, calls[sent[0]].keys[0])
		if err != nil {
			return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
		}
		via = node
	}
	if err := b.renewRound(ctx, via, pointers(calls, sent)); err != nil {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
	}
	b.fillRenewals(ctx, results, rs, calls, sent)
	return results, nil
}

// fillRenewals turns the outcomes of the renewals sent into results.
func (b *Backend) fillRenewals(ctx context.Context, results []backend.RenewResult, rs []backend.RenewRequest, calls []scriptCall, sent []int) {
	for _, i := range sent {
		results[i].Grant, results[i].Err = b.renewAnswer(ctx, rs[i], &calls[i])
	}
}

// renewRound sends calls, and WAIT when confirmation is on, in one pipeline on
// via (a second one when the server had to be given the script). It returns an
// error when no renewal got an answer from Redis (a fault of the whole link)
// or when WAIT failed; a fault met by only some renewals (one Cluster node
// down) stays in their calls.
func (b *Backend) renewRound(ctx context.Context, via pipeClient, calls []*scriptCall) error {
	b.runPipeline(ctx, via, calls, b.cfg.replicas > 0)
	answered := false
	var fault, waitFault error
	for _, c := range calls {
		err := c.cmd.Err()
		var reply goredis.Error
		switch {
		case err == nil || errors.As(err, &reply):
			answered = true
			if c.waitErr != nil && waitFault == nil {
				waitFault = fmt.Errorf("WAIT: %w", c.waitErr)
			}
		case fault == nil:
			fault = err
		}
	}
	if !answered {
		return fault // not an answer from Redis: nothing is confirmed
	}
	return waitFault
}

// renewPerMaster is RenewBatch on Cluster. The renewals are grouped by the
// master of their slot and each group is pipelined to that master, with its
// own WAIT when confirmation is on (one WAIT speaks only for the node and
// connection it runs on), the groups in parallel. A group whose master cannot
// be reached leaves its renewals unconfirmed and the others alone, and makes
// the client reload the slot map, so that the next batch finds the replica
// that took over. (A ClusterClient's own pipeline waits for every node, and
// retries a dead one for seconds, which would cost the live masters' leases.)
func (b *Backend) renewPerMaster(ctx context.Context, cc *goredis.ClusterClient, rs []backend.RenewRequest,
	calls []scriptCall, sent []int, results []backend.RenewResult) ([]backend.RenewResult, error) {
	groups := map[*goredis.Client][]int{}
	var order []*goredis.Client
	for _, i := range sent {
		node, err := cc.MasterForKey(ctx, calls[i].keys[0])
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
		wg.Go(func() {
			idx := groups[node]
			if err := b.renewRound(ctx, node, pointers(calls, idx)); err != nil {
				faults[g] = err
				b.reloadAfter(ctx, err)
				for _, i := range idx {
					results[i].Err = fmt.Errorf("redis: renew %q: %w", rs[i].Key, err)
				}
				return
			}
			b.fillRenewals(ctx, results, rs, calls, idx)
		})
	}
	wg.Wait()
	if len(order) > 0 && len(order) == countErrs(faults) {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), errors.Join(faults...))
	}
	return results, nil
}

// pointers returns the calls at idx.
func pointers(calls []scriptCall, idx []int) []*scriptCall {
	ps := make([]*scriptCall, len(idx))
	for j, i := range idx {
		ps[j] = &calls[i]
	}
	return ps
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
