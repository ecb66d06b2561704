package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/backend"
)

// Inspect implements backend.Backend: the key and the time its lease has
// left (whole seconds, rounded up, as etcd reports it). A key whose lease has
// just ended but which etcd has not deleted yet is not held; nor is one in
// its lease's last second, which etcd cannot tell apart from it (a holder
// that renews as the engine does never gets there).
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	resp, err := b.cli.Get(ctx, b.etcdKey(key))
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("etcd: inspect %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return backend.Holder{}, false, nil
	}
	h, live, err := b.holdingOf(ctx, resp.Kvs[0])
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("etcd: inspect %q: %w", key, err)
	}
	return h, live, nil
}

// holdingOf describes kv, asking the cluster for its lease's time left. A
// lease whose TTL reads 0 is not held: etcd reads 0 both in a lease's last
// second and for up to a second past its end (until the leader deletes the
// key), and a holding shown as held must not be one that has ended.
func (b *Backend) holdingOf(ctx context.Context, kv *mvccpb.KeyValue) (backend.Holder, bool, error) {
	h, err := b.decode(kv)
	if err != nil {
		return backend.Holder{}, false, err
	}
	secs, err := b.timeToLive(ctx, h.leaseID)
	if err != nil || secs <= 0 {
		return backend.Holder{}, false, err
	}
	left := time.Duration(secs+1) * time.Second // etcd rounds down
	return backend.Holder{
		Key: strings.TrimPrefix(string(kv.Key), b.keys), Owner: h.Owner, Token: h.token,
		ExpiresAt: time.Now().Add(left), ExpiresIn: left, Metadata: h.Metadata,
	}, true, nil
}

// listPage is how many keys one List read returns.
const listPage = 100

// List implements backend.Backend: range reads of listPage keys in byte order,
// each holding's time left asked of its lease (one call per holding).
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	start := b.etcdKey(prefix)
	end := clientv3.GetPrefixRangeEnd(start)
	for {
		resp, err := b.cli.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(listPage))
		if err != nil {
			return fmt.Errorf("etcd: list %q: %w", prefix, err)
		}
		for _, kv := range resp.Kvs {
			h, live, err := b.holdingOf(ctx, kv)
			if err != nil {
				return fmt.Errorf("etcd: list %q: %w", prefix, err)
			}
			if live && !fn(h) {
				return nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Revoke implements backend.Backend: it deletes the key if it did not change
// since it was read (watchers are told), then revokes its lease. The token, a revision, is never
// issued again; the holder's next renewal finds the key gone or someone
// else's.
func (b *Backend) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	resp, err := b.cli.Get(ctx, b.etcdKey(key))
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("etcd: revoke %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return backend.Holder{}, false, nil
	}
	h, live, err := b.holdingOf(ctx, resp.Kvs[0])
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("etcd: revoke %q: %w", key, err)
	}
	if !live || (token != 0 && h.Token != token) {
		return backend.Holder{}, false, nil
	}
	// Delete the key only if it is still what was read (a renewal with
	// another TTL moves it to a new lease), then end its lease too.
	kv := resp.Kvs[0]
	tr, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(string(kv.Key))).
		Commit()
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("etcd: revoke %q: %w", key, err)
	}
	if !tr.Succeeded {
		return b.Revoke(ctx, key, token) // changed meanwhile: look again
	}
	b.revokeDetached(ctx, clientv3.LeaseID(kv.Lease))
	return h, true, nil
}
