package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/backoff"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Backend is the etcd lease store. It is safe for concurrent use.
type Backend struct {
	// Unsupported answers Batch, WatchHandOffs and Shard: etcd has no
	// waiter queue, and one cluster is one shard.
	backend.Unsupported

	cli    *clientv3.Client
	prefix string
	keys   string // prefix + keySeparator: what every lease's etcd key starts with
	minTTL time.Duration
	log    *slog.Logger
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend on cli. The client stays the caller's: Close does not
// close it. Give it every member's endpoint, so that it fails over when one
// goes away.
func New(cli *clientv3.Client, opts ...Option) (*Backend, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cli == nil:
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOption)
	case cfg.prefix == "":
		return nil, fmt.Errorf("%w: empty key prefix (the backend would watch and list the whole keyspace)", ErrInvalidOption)
	case cfg.minTTL < time.Second || cfg.minTTL%time.Second != 0:
		return nil, fmt.Errorf("%w: WithMinTTL(%v): etcd leases last whole seconds, at least 1s", ErrInvalidOption, cfg.minTTL)
	case cfg.logger == nil:
		return nil, fmt.Errorf("%w: WithLogger(nil)", ErrInvalidOption)
	}
	return &Backend{cli: cli, prefix: cfg.prefix, keys: cfg.prefix + keySeparator, minTTL: cfg.minTTL, log: cfg.logger}, nil
}

// Info implements backend.Backend: releases are announced (a watch), and
// etcd leases count whole seconds, at least the backend's minimum.
func (b *Backend) Info() backend.Info {
	return backend.Info{Name: "etcd", AnnouncesReleases: true, TTLUnit: time.Second, MinTTL: b.minTTL}
}

// Close implements backend.Backend. The backend holds nothing of its own: the
// client is the caller's and every call's streams end with the call.
func (b *Backend) Close() error { return nil }

// MinTTL is the shortest TTL the backend accepts (WithMinTTL).
func (b *Backend) MinTTL() time.Duration { return b.minTTL }

// record is the value stored under a held key. The token is not in it: it is
// the key's CreateRevision, and the expiry is the etcd lease the key is
// attached to.
type record struct {
	Owner    string `json:"o"`
	Attempt  string `json:"a"`
	Metadata string `json:"m,omitempty"`
	// TTL is the TTL the holder asked for, in seconds (the lease's granted
	// TTL may be longer if the server raised it): a renewal with the same TTL
	// is a keep-alive, another TTL moves the key to a new lease.
	TTL int64 `json:"t"`
}

func (r record) encode() string {
	b, _ := json.Marshal(r) // strings and an integer: cannot fail
	return string(b)
}

// holding is a decoded key-value of the store.
type holding struct {
	record
	token   uint64 // CreateRevision
	modRev  int64
	leaseID clientv3.LeaseID
}

func (b *Backend) decode(kv *mvccpb.KeyValue) (holding, error) {
	var r record
	if err := json.Unmarshal(kv.Value, &r); err != nil || r.Owner == "" || r.Attempt == "" {
		return holding{}, fmt.Errorf("etcd: key %q under the backend's prefix does not hold a lease record (another program writes there?): %q", kv.Key, kv.Value)
	}
	return holding{record: r, token: uint64(kv.CreateRevision), modRev: kv.ModRevision, leaseID: clientv3.LeaseID(kv.Lease)}, nil
}

// etcdKey is the etcd key of a lease name: the prefix, a NUL byte and the
// name. Names never hold a NUL, so the first NUL ends the prefix, and
// backends whose prefixes nest ("lh/" and "lh/app/") never share a key:
// with the prefix and the name end to end, the first's "app/job" was the
// second's "job".
func (b *Backend) etcdKey(key string) string { return b.keys + key }

// keySeparator ends the prefix in every etcd key of the backend (etcdKey).
const keySeparator = "\x00"

// ttlSeconds checks ttl against etcd's limits (Info: whole seconds, at least
// minTTL), the same check the engine makes before it sends anything.
func (b *Backend) ttlSeconds(ttl time.Duration) (int64, error) {
	if err := b.Info().CheckTTL(ttl); err != nil {
		if ttl%time.Second == 0 { // whole seconds: below the minimum
			return 0, fmt.Errorf("%w (etcd raises shorter leases to 1.5 × its election timeout; see WithMinTTL)", err)
		}
		return 0, err
	}
	return int64(ttl / time.Second), nil
}

// Acquire implements backend.Backend: one lease grant and one transaction
// (if the key is missing, put it on the new lease; else read it). The token
// is the revision of that transaction, which becomes the key's
// CreateRevision: revisions increase strictly across the whole cluster, so a
// new holding always gets a token greater than any before, through leader
// changes and restarts.
func (b *Backend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	if err := b.Info().CheckLimit(r.Limit); err != nil {
		return backend.Grant{}, fmt.Errorf("etcd: acquire %q: %w", r.Key, err)
	}
	secs, err := b.ttlSeconds(r.TTL)
	if err != nil {
		return backend.Grant{}, err
	}
	lease, err := b.cli.Grant(ctx, secs)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcd: acquire %q: grant lease: %w", r.Key, err)
	}
	// The new lease is ours until a key is put on it; unless that happened,
	// revoke it on the way out so that busy answers leave nothing behind.
	used := false
	defer func() {
		if !used {
			b.revokeDetached(ctx, lease.ID)
		}
	}()
	k := b.etcdKey(r.Key)
	val := record{Owner: r.Owner, Attempt: r.Attempt, Metadata: r.Metadata, TTL: secs}.encode()
	cmp := clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	for notFound := 0; ; {
		resp, err := b.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(k, val, clientv3.WithLease(lease.ID))).Else(clientv3.OpGet(k)).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && notFound < leaseLagTries {
			// The lease was granted, but the member serving this request
			// has not applied the grant yet (the client spreads requests
			// over the members). The transaction failed whole: try again.
			notFound++
			if err := backoff.Sleep(ctx, leaseLagPause); err != nil {
				return backend.Grant{}, fmt.Errorf("etcd: acquire %q: %w", r.Key, err)
			}
			continue
		}
		if err != nil {
			// Ambiguous: the put may have happened. Revoking the lease (the
			// deferred call) removes the key with it if it did.
			return backend.Grant{}, fmt.Errorf("etcd: acquire %q: %w", r.Key, err)
		}
		if resp.Succeeded {
			used = true
			return backend.Grant{Acquired: true, Token: uint64(resp.Header.Revision), ExpiresAt: time.Now().Add(time.Duration(lease.TTL) * time.Second)}, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return backend.Grant{}, fmt.Errorf("etcd: acquire %q: the transaction's read found no key after its compare did", r.Key)
		}
		h, err := b.decode(kvs[0])
		if err != nil {
			return backend.Grant{}, err
		}
		if h.Owner == r.Owner && h.Attempt == r.Attempt {
			// A retry of this very attempt: move the holding to the new lease
			// (new TTL, new metadata), keeping its CreateRevision, the token.
			moved, err := b.move(ctx, k, h, val, lease.ID)
			if err != nil {
				return backend.Grant{}, fmt.Errorf("etcd: acquire %q: %w", r.Key, err)
			}
			if !moved {
				continue // changed meanwhile: look again
			}
			used = true
			return backend.Grant{Acquired: true, Token: h.token, ExpiresAt: time.Now().Add(time.Duration(lease.TTL) * time.Second)}, nil
		}
		left, live, err := b.remaining(ctx, h.leaseID)
		if err != nil {
			return backend.Grant{}, fmt.Errorf("etcd: acquire %q: %w", r.Key, err)
		}
		if !live {
			// Expired just now; the leader is deleting its key: look again.
			if err := settle(ctx); err != nil {
				return backend.Grant{}, fmt.Errorf("etcd: acquire %q: %w", r.Key, err)
			}
			continue
		}
		return backend.Grant{
			Holder: h.Owner, HolderToken: h.token,
			HolderExpiresAt: time.Now().Add(left), HolderExpiresIn: left,
		}, nil
	}
}

// move puts the holding h of etcd key k, unchanged since it was read, on
// lease with the value val, and revokes its old lease. It reports false when
// the key changed since it was read.
func (b *Backend) move(ctx context.Context, k string, h holding, val string, lease clientv3.LeaseID) (bool, error) {
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", h.modRev)).
		Then(clientv3.OpPut(k, val, clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded && h.leaseID != lease {
		// Nothing else is on the old lease: each holding has its own.
		b.revokeDetached(ctx, h.leaseID)
	}
	return resp.Succeeded, nil
}

// remaining asks the cluster how long lease has left, at most. etcd answers
// in whole seconds rounded down (0 while less than a second is left; -1 or
// ErrLeaseNotFound when the lease is gone), so the bound is one second more.
// live is false when the lease is gone.
//
// A refusal may take 0 as live (the waiter only retries a second later);
// Inspect and List may not (holdingOf).
func (b *Backend) remaining(ctx context.Context, lease clientv3.LeaseID) (left time.Duration, live bool, err error) {
	secs, err := b.timeToLive(ctx, lease)
	if err != nil || secs < 0 {
		return 0, false, err
	}
	return time.Duration(secs+1) * time.Second, true, nil
}

// timeToLive is etcd's TTL of lease in whole seconds, rounded down: -1 when
// the lease is gone.
func (b *Backend) timeToLive(ctx context.Context, lease clientv3.LeaseID) (int64, error) {
	resp, err := b.cli.TimeToLive(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("lease time to live: %w", err)
	}
	return max(resp.TTL, -1), nil
}

// settle waits a moment before an acquire looks at a key again (its lease
// has just ended and the leader is deleting it), so that it never spins.
func settle(ctx context.Context) error {
	t := time.NewTimer(10 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// revokeDetached revokes lease even when ctx has ended (clean-up after a
// failed or abandoned call), for a few seconds at most. A failure is only
// logged: the lease then ends by its TTL.
func (b *Backend) revokeDetached(ctx context.Context, lease clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := b.cli.Revoke(rctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		b.log.WarnContext(ctx, "leasehold etcd: revoking an unused lease failed; it ends by its TTL", "lease", int64(lease), "err", err)
	}
}

// get reads the holding of etcd key k (linearizable). found is false when the
// key is missing.
func (b *Backend) get(ctx context.Context, k string) (h holding, found bool, err error) {
	resp, err := b.cli.Get(ctx, k)
	if err != nil {
		return holding{}, false, err
	}
	if len(resp.Kvs) == 0 {
		return holding{}, false, nil
	}
	h, err = b.decode(resp.Kvs[0])
	return h, err == nil, err
}

// Renew implements backend.Backend: read the holding, check that it is the
// one named, then keep its lease alive (a renewal with another TTL moves the
// key to a new lease instead). A keep-alive resets the lease to its full
// TTL on the leader; it never shortens it.
func (b *Backend) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	secs, err := b.ttlSeconds(r.TTL)
	if err != nil {
		return backend.Grant{}, err
	}
	h, found, err := b.get(ctx, b.etcdKey(r.Key))
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcd: renew %q: %w", r.Key, err)
	}
	if !found || !names(h, r) {
		return backend.Grant{}, notHeld(r)
	}
	if h.TTL != secs {
		return b.renewMoving(ctx, r, h, secs)
	}
	resp, err := b.cli.KeepAliveOnce(ctx, h.leaseID)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return backend.Grant{}, notHeld(r)
	}
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcd: renew %q: keep-alive: %w", r.Key, err)
	}
	return backend.Grant{Acquired: true, Token: h.token, ExpiresAt: time.Now().Add(time.Duration(resp.TTL) * time.Second)}, nil
}

// renewMoving renews h with another TTL than its lease's: a new lease, and
// the key moved onto it if it did not change since it was read.
func (b *Backend) renewMoving(ctx context.Context, r backend.RenewRequest, h holding, secs int64) (backend.Grant, error) {
	lease, err := b.cli.Grant(ctx, secs)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcd: renew %q: grant lease: %w", r.Key, err)
	}
	rec := h.record
	rec.TTL = secs
	moved, err := b.move(ctx, b.etcdKey(r.Key), h, rec.encode(), lease.ID)
	if err != nil || !moved {
		b.revokeDetached(ctx, lease.ID)
	}
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcd: renew %q: %w", r.Key, err)
	}
	if !moved {
		// The key changed since it was read: only a release, a revoke, an
		// expiry or a retry of the same attempt change it. Ask again.
		return b.Renew(ctx, r)
	}
	return backend.Grant{Acquired: true, Token: h.token, ExpiresAt: time.Now().Add(time.Duration(lease.TTL) * time.Second)}, nil
}

// names reports whether h is the holding r names.
func names(h holding, r backend.RenewRequest) bool {
	return h.Owner == r.Owner && h.Attempt == r.Attempt && h.token == r.Token
}

func notHeld(r backend.RenewRequest) error {
	return fmt.Errorf("etcd: renew %q (owner %q, token %d): %w", r.Key, r.Owner, r.Token, backend.ErrNotHeld)
}

// Release implements backend.Backend: read the holding and, when it is the
// one named, revoke its lease, which deletes the key with it (and tells
// watchers). Each holding has a lease of its own, so nothing else ends.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	h, found, err := b.get(ctx, b.etcdKey(r.Key))
	if err != nil {
		return fmt.Errorf("etcd: release %q: %w", r.Key, err)
	}
	if !found || h.Owner != r.Owner || h.Attempt != r.Attempt || (r.Token != 0 && h.token != r.Token) {
		return nil
	}
	if _, err := b.cli.Revoke(ctx, h.leaseID); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcd: release %q: revoke lease: %w", r.Key, err)
	}
	return nil
}

// A lease just granted may not be known yet to the member that serves the
// next request: leaseLagTries pauses of leaseLagPause give it time to apply
// the grant.
const (
	leaseLagTries = 10
	leaseLagPause = 20 * time.Millisecond
)
