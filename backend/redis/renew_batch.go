package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
)

var _ backend.BatchRenewer = (*Backend)(nil)

// RenewBatch renews every request in one pipelined round trip (one per
// Cluster node) and returns one result per request, in order: a Grant, or an
// error wrapping backend.ErrNotHeld (the holding no longer exists),
// backend.ErrInvalidRequest (that request breaks the limits; it is not sent),
// ErrNotConfirmed (too few replicas acknowledged), or a Redis error reply for
// that lease alone. A non-nil error means the batch as a whole could not be
// confirmed (a network fault, the context ending); then no result is returned
// and the caller must treat every renewal as unconfirmed.
//
// With replica confirmation on a single node or Sentinel client, one WAIT at
// the end of the pipeline confirms the whole batch; on Cluster the requests
// are renewed and confirmed one by one.
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
	if _, cluster := b.client.(*goredis.ClusterClient); cluster && b.cfg.replicas > 0 {
		return b.renewEach(ctx, rs, sent, results)
	}

	cmds, acked, err := b.renewPipeline(ctx, rs, sent)
	if err != nil {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
	}
	for j, i := range sent {
		r := rs[i]
		g, holder, err := parseRenew(cmds[j].Val())
		switch {
		case cmds[j].Err() != nil:
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
	return results, nil
}

// renewPipeline sends the renew script for each sent request, and WAIT when
// confirmation is on, in one pipeline. When the server does not know the
// script yet it loads it and sends the batch again (renewal is idempotent).
// It returns an error only for a fault that is not one lease's own Redis
// error reply.
func (b *Backend) renewPipeline(ctx context.Context, rs []backend.RenewRequest, sent []int) ([]*goredis.Cmd, int64, error) {
	for attempt := 0; ; attempt++ {
		var p goredis.Pipeliner
		if b.cfg.replicas > 0 {
			var err error
			if p, err = b.primaryPipeline(ctx, b.LeaseKey(rs[sent[0]].Key)); err != nil {
				return nil, 0, err
			}
		} else {
			p = b.client.Pipeline()
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

		noScript := false
		for _, c := range cmds {
			err := c.Err()
			if err == nil {
				continue
			}
			if goredis.HasErrorPrefix(err, "NOSCRIPT") {
				noScript = true
				continue
			}
			var reply goredis.Error
			if !errors.As(err, &reply) {
				return nil, 0, err // not an answer from Redis: nothing is confirmed
			}
		}
		if noScript && attempt == 0 {
			// A ClusterClient loads it on every master.
			if err := renewScript.Load(ctx, b.client).Err(); err != nil {
				return nil, 0, err
			}
			continue
		}
		var acked int64
		if wait != nil {
			var err error
			if acked, err = wait.Int64(); err != nil {
				return nil, 0, fmt.Errorf("WAIT: %w", err)
			}
		}
		return cmds, acked, nil
	}
}

// renewEach renews the sent requests one by one, each confirmed on its own
// node: the Cluster path with replica confirmation, where one WAIT cannot
// speak for several nodes.
func (b *Backend) renewEach(ctx context.Context, rs []backend.RenewRequest, sent []int, results []backend.RenewResult) ([]backend.RenewResult, error) {
	for _, i := range sent {
		g, err := b.Renew(ctx, rs[i])
		if err != nil && !errors.Is(err, backend.ErrNotHeld) && !errors.Is(err, ErrNotConfirmed) {
			var reply goredis.Error
			if !errors.As(err, &reply) {
				return nil, err
			}
		}
		results[i] = backend.RenewResult{Grant: g, Err: err}
	}
	return results, nil
}
