package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/backend"
)

// maxBatch is how many renewals share one transaction and one keep-alive
// stream: etcd refuses transactions of more than 128 operations by default
// (--max-txn-ops).
const maxBatch = 128

// RenewBatch implements backend.Backend in two round trips for up to 128
// renewals: one transaction reads every key, then keep-alive streams (up to
// four side by side) carry the keep-alives of every lease still named by its
// request, pipelined (the member answers them in order without waiting for
// the next request). Renewals asking for another TTL than their lease's move the key
// to a new lease one by one, as Renew does.
func (b *Backend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	out := make([]backend.RenewResult, len(rs))
	for start := 0; start < len(rs); start += maxBatch {
		end := min(start+maxBatch, len(rs))
		if err := b.renewChunk(ctx, rs[start:end], out[start:end]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (b *Backend) renewChunk(ctx context.Context, rs []backend.RenewRequest, out []backend.RenewResult) error {
	type pending struct {
		i     int
		h     holding
		lease clientv3.LeaseID
	}
	var reads []clientv3.Op
	var idx []int // request index of each read
	secs := make([]int64, len(rs))
	for i, r := range rs {
		err := r.Validate()
		if err == nil {
			secs[i], err = b.ttlSeconds(r.TTL)
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		reads = append(reads, clientv3.OpGet(b.etcdKey(r.Key)))
		idx = append(idx, i)
	}
	if len(reads) == 0 {
		return nil
	}
	resp, err := b.cli.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		return fmt.Errorf("etcd: renew batch: read: %w", err)
	}
	var keepAlive []pending
	for j, rr := range resp.Responses {
		i := idx[j]
		kvs := rr.GetResponseRange().Kvs
		if len(kvs) == 0 {
			out[i].Err = notHeld(rs[i])
			continue
		}
		h, err := b.decode(kvs[0])
		if err != nil {
			out[i].Err = err
			continue
		}
		if !names(h, rs[i]) {
			out[i].Err = notHeld(rs[i])
			continue
		}
		if h.TTL != secs[i] {
			out[i].Grant, out[i].Err = b.renewMoving(ctx, rs[i], h, secs[i])
			continue
		}
		keepAlive = append(keepAlive, pending{i: i, h: h, lease: h.leaseID})
	}
	if len(keepAlive) == 0 {
		return nil
	}
	ids := make([]clientv3.LeaseID, len(keepAlive))
	for j, p := range keepAlive {
		ids[j] = p.lease
	}
	ttls, err := b.keepAlive(ctx, ids)
	if err != nil {
		return fmt.Errorf("etcd: renew batch: %w", err)
	}
	now := time.Now()
	for j, p := range keepAlive {
		if ttls[j] <= 0 {
			out[p.i].Err = notHeld(rs[p.i])
			continue
		}
		out[p.i].Grant = backend.Grant{Acquired: true, Token: p.h.token, ExpiresAt: now.Add(time.Duration(ttls[j]) * time.Second)}
	}
	return nil
}

// keepAliveStreams is how many keep-alive streams one batch uses at most, and
// keepAlivePerStream how many keep-alives fill one first: a member answers
// the requests of one stream one after the other (forwarding each to the
// leader when it is a follower), so a few streams side by side divide the
// wait.
const (
	keepAliveStreams   = 4
	keepAlivePerStream = 32
)

// keepAlive sends one keep-alive per lease, on up to keepAliveStreams streams
// side by side, and returns the TTL the leader reset each to (0 or less: the
// lease is gone).
func (b *Backend) keepAlive(ctx context.Context, ids []clientv3.LeaseID) ([]int64, error) {
	n := min(keepAliveStreams, (len(ids)+keepAlivePerStream-1)/keepAlivePerStream)
	if n <= 1 {
		return b.keepAliveStream(ctx, ids)
	}
	ttls := make([]int64, len(ids))
	errs := make([]error, n)
	per := (len(ids) + n - 1) / n
	var wg sync.WaitGroup
	for i := range n {
		lo, hi := i*per, min((i+1)*per, len(ids))
		wg.Go(func() {
			t, err := b.keepAliveStream(ctx, ids[lo:hi])
			errs[i] = err
			copy(ttls[lo:hi], t)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ttls, nil
}

// keepAliveStream sends one keep-alive per lease on a single stream,
// pipelined, and returns the TTL the leader reset each to. The stream
// requires a leader, so a member cut off from its cluster fails the batch
// instead of waiting.
func (b *Backend) keepAliveStream(ctx context.Context, ids []clientv3.LeaseID) ([]int64, error) {
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel() // ends the stream
	stream, err := clientv3.RetryLeaseClient(b.cli).LeaseKeepAlive(sctx)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	sent := make(chan error, 1)
	go func() {
		for _, id := range ids {
			if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
				sent <- err
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	ttls := make([]int64, len(ids))
	for j := range ids {
		resp, err := stream.Recv()
		if err != nil {
			cancel()
			<-sent
			return nil, clientv3.ContextError(ctx, err)
		}
		// Answers come in the order of the requests; check anyway, as a
		// mismatch would renew the wrong holding.
		if clientv3.LeaseID(resp.ID) != ids[j] {
			cancel()
			<-sent
			return nil, errors.New("keep-alive answers out of order")
		}
		ttls[j] = resp.TTL
	}
	if err := <-sent; err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return ttls, nil
}
