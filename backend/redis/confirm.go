package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// runConfirmed runs script and then WAIT in one pipeline, so both go over the
// same connection to the primary that owns the keys: WAIT counts the replicas
// that acknowledged the writes of its own connection. It returns the script's
// reply and the number of replicas that acknowledged.
func (b *Backend) runConfirmed(ctx context.Context, s *goredis.Script, keys []string, args []any) (any, int64, error) {
	reply, acked, err := b.pipeWait(ctx, s, false, keys, args)
	if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		reply, acked, err = b.pipeWait(ctx, s, true, keys, args)
	}
	return reply, acked, err
}

func (b *Backend) pipeWait(ctx context.Context, s *goredis.Script, eval bool, keys []string, args []any) (any, int64, error) {
	p, err := b.primaryPipeline(ctx, keys[0])
	if err != nil {
		return nil, 0, err
	}
	var run *goredis.Cmd
	if eval {
		run = s.Eval(ctx, p, keys, args...)
	} else {
		run = s.EvalSha(ctx, p, keys, args...)
	}
	wait := p.Do(ctx, "WAIT", b.cfg.replicas, ttlMillis(b.cfg.confirmTimeout))
	// Exec reports only the first failure; each command keeps its own, and a
	// script that ran must be seen even when WAIT then failed.
	_, _ = p.Exec(ctx)
	if err := run.Err(); err != nil {
		return nil, 0, err
	}
	acked, err := wait.Int64()
	if err != nil {
		return nil, 0, fmt.Errorf("WAIT: %w", err)
	}
	return run.Val(), acked, nil
}

// primaryPipeline returns a pipeline on the one connection that serves key:
// on Cluster the master of key's slot, otherwise the client itself (New only
// accepts these two kinds with confirmation on).
func (b *Backend) primaryPipeline(ctx context.Context, key string) (goredis.Pipeliner, error) {
	switch c := b.client.(type) {
	case *goredis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.Pipeline(), nil
	case *goredis.Client:
		return c.Pipeline(), nil
	}
	return nil, fmt.Errorf("%w: %T cannot confirm writes", ErrInvalidOption, b.client)
}

// reloadAfter makes a ClusterClient reload its slot map, in the background,
// after err: go-redis reloads it on MOVED, but not when a master stops
// answering (it keeps the dead master until ClusterStateReloadInterval, a
// minute by default, while its replica serves the slots), and calls made
// through a node's own client (replica confirmation, batches) do not follow
// MOVED at all. Redis errors other than the cluster's own redirections and refusals
// (a script's error, NOSCRIPT) say nothing about the topology.
func (b *Backend) reloadAfter(ctx context.Context, err error) {
	cc, ok := b.client.(*goredis.ClusterClient)
	if !ok || err == nil {
		return
	}
	var reply goredis.Error
	if errors.As(err, &reply) && !goredis.HasErrorPrefix(err, "MOVED") && !goredis.HasErrorPrefix(err, "ASK") &&
		!goredis.HasErrorPrefix(err, "CLUSTERDOWN") && !goredis.HasErrorPrefix(err, "READONLY") &&
		!goredis.HasErrorPrefix(err, "TRYAGAIN") {
		return
	}
	cc.ReloadState(ctx)
}
