package etcd

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchReleases implements backend.Backend with one etcd watch on the
// backend's prefix, filtered to deletions: a release, a revoke and an expiry
// all delete the key (the lease takes it with it), so waiters wake at once in
// all three cases. The watch requires a leader: on a member cut off from its
// cluster it is cancelled and started again, elsewhere if the client can. A
// watch started again resumes at the revision after the last one it saw, so
// no deletion is missed across leader changes (unless etcd compacted that
// history meanwhile; waiters also retry at the holder's expiry).
func (b *Backend) WatchReleases(ctx context.Context, fn func(key string)) error {
	failures := 0
	var next int64 // 0: from now
	for {
		watched := b.watch(ctx, fn, &next)
		if ctx.Err() != nil {
			return nil
		}
		if watched {
			failures = 0
		}
		failures++
		wait := min(50*time.Millisecond<<min(failures, 5), time.Second)
		b.log.WarnContext(ctx, "leasehold etcd: release watch interrupted; watching again", "prefix", b.prefix, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// watch runs one watch from revision *next (0: from now) until it ends, and
// leaves in *next the revision after the last one it saw. watched reports
// whether any answer came through it (it worked for a while).
func (b *Backend) watch(ctx context.Context, fn func(key string), next *int64) (watched bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()}
	if *next > 0 {
		opts = append(opts, clientv3.WithRev(*next))
	}
	for resp := range b.cli.Watch(wctx, b.keys, opts...) {
		if resp.CompactRevision != 0 {
			*next = 0 // that history is gone: from now on
		}
		if resp.Err() != nil || resp.Canceled {
			return watched
		}
		watched = true
		*next = resp.Header.Revision + 1
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				fn(strings.TrimPrefix(string(ev.Kv.Key), b.keys))
			}
		}
	}
	return watched
}
