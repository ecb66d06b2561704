package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// runOne runs one call and returns it with its outcome. Under replica
// confirmation a write goes in a pipeline with WAIT to the primary of its
// name, so both use the same connection: WAIT counts the replicas that
// acknowledged the writes of its own connection. Otherwise it is sent by SHA,
// with EVAL (which also loads the script) when the server does not know it
// yet. (By value: a call that stays on the stack costs no allocation.)
func (b *Backend) runOne(ctx context.Context, c scriptCall) scriptCall {
	if b.cfg.replicas > 0 && c.confirm {
		return b.runConfirmed(ctx, c)
	}
	c.cmd = c.script.Run(ctx, b.client, c.keys, c.args...)
	return c
}

func (b *Backend) runConfirmed(ctx context.Context, c scriptCall) scriptCall {
	node, err := b.primary(ctx, c.keys[0])
	if err != nil {
		c.fail(ctx, err)
		return c
	}
	b.runPipeline(ctx, node, []*scriptCall{&c}, true)
	return c
}

// primary returns the client of the one server that owns key: on Cluster the
// master of key's slot, otherwise the client itself (New only accepts these
// two kinds with confirmation on). Its pipelines use one connection.
func (b *Backend) primary(ctx context.Context, key string) (*goredis.Client, error) {
	switch c := b.client.(type) {
	case *goredis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err == nil {
			b.slotMap.Store(true)
		}
		return node, err
	case *goredis.Client:
		return c, nil
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
