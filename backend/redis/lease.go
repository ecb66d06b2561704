package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Acquire implements backend.Backend: one acquire script, then, with replica
// confirmation on, WAIT on the same connection. A grant that is not confirmed
// is released and reported as not acquired.
func (b *Backend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	if err := b.closed(); err != nil {
		return backend.Grant{}, err
	}
	keys := []string{b.LeaseKey(r.Key), b.TokenKey(r.Key)}
	args := []any{r.Owner, r.Attempt, ttlMillis(r.TTL), r.Metadata, graceMillis(b.cfg.restartGrace)}

	var (
		reply any
		acked int64
		err   error
	)
	if b.cfg.replicas > 0 {
		reply, acked, err = b.runConfirmed(ctx, acquireScript, keys, args)
	} else {
		reply, err = acquireScript.Run(ctx, b.client, keys, args...).Result()
	}
	if err != nil {
		b.reloadAfter(ctx, err)
		return backend.Grant{}, fmt.Errorf("redis: acquire %q: %w", r.Key, err)
	}
	g, err := parseAcquire(reply)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("redis: acquire %q: %w", r.Key, err)
	}
	if g.Acquired && b.cfg.replicas > 0 && acked < int64(b.cfg.replicas) {
		return b.unconfirmed(ctx, r, g.Token, acked)
	}
	return g, nil
}

// unconfirmed gives back a grant that too few replicas acknowledged: after a
// failover to one of the others, the name would be free again while this owner
// works, so it must not count as acquired.
func (b *Backend) unconfirmed(ctx context.Context, r backend.AcquireRequest, token uint64, acked int64) (backend.Grant, error) {
	b.cfg.logger.WarnContext(ctx, "redis: grant not confirmed by replicas, releasing it",
		"key", r.Key, "token", token, "acked", acked, "wanted", b.cfg.replicas)
	err := b.Release(ctx, backend.ReleaseRequest{Key: r.Key, Owner: r.Owner, Attempt: r.Attempt, Token: token})
	if err != nil {
		// The grant may still stand: report a fault, so that the engine cleans
		// up as after any ambiguous acquire.
		return backend.Grant{}, fmt.Errorf("redis: acquire %q: %w (%d of %d replicas) and releasing it failed: %w",
			r.Key, ErrNotConfirmed, acked, b.cfg.replicas, err)
	}
	return backend.Grant{Acquired: false}, nil
}

// Renew implements backend.Backend. A holding that no longer matches owner,
// attempt and token gives an error wrapping backend.ErrNotHeld; with replica confirmation
// on, a renewal too few replicas acknowledged gives one wrapping
// ErrNotConfirmed.
func (b *Backend) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	if err := b.closed(); err != nil {
		return backend.Grant{}, err
	}
	keys := []string{b.LeaseKey(r.Key)}
	args := renewArgs(r)

	var (
		reply any
		acked int64
		err   error
	)
	if b.cfg.replicas > 0 {
		reply, acked, err = b.runConfirmed(ctx, renewScript, keys, args)
	} else {
		reply, err = renewScript.Run(ctx, b.client, keys, args...).Result()
	}
	if err != nil {
		b.reloadAfter(ctx, err)
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w", r.Key, err)
	}
	g, holder, err := parseRenew(reply)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w", r.Key, err)
	}
	if !g.Acquired {
		if holder == "" {
			return backend.Grant{}, fmt.Errorf("redis: renew %q: %w (the name is free)", r.Key, backend.ErrNotHeld)
		}
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w (held by %q)", r.Key, backend.ErrNotHeld, holder)
	}
	if b.cfg.replicas > 0 && acked < int64(b.cfg.replicas) {
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w (%d of %d replicas)", r.Key, ErrNotConfirmed, acked, b.cfg.replicas)
	}
	g.Token = r.Token
	return g, nil
}

// renewArgs are the renew script's arguments (scripts/CONTRACT.md).
func renewArgs(r backend.RenewRequest) []any {
	return []any{r.Owner, r.Attempt, strconv.FormatUint(r.Token, 10), ttlMillis(r.TTL)}
}

// Release implements backend.Backend. It ends r.Attempt's holding (the one
// with r.Token, or whatever its token when r.Token is 0) and, when one ended
// and notifications are on, publishes the key on the release channel.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := b.closed(); err != nil {
		return err
	}
	token := "0"
	if r.Token != 0 {
		token = strconv.FormatUint(r.Token, 10)
	}
	channel := ""
	if b.cfg.notify {
		channel = b.Channel()
	}
	err := releaseScript.Run(ctx, b.client, []string{b.LeaseKey(r.Key)}, r.Owner, r.Attempt, token, channel, r.Key).Err()
	if err != nil {
		b.reloadAfter(ctx, err)
		return fmt.Errorf("redis: release %q: %w", r.Key, err)
	}
	return nil
}

// graceMillis rounds up like ttlMillis: a grace never ends early.
func graceMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return ttlMillis(d)
}

// ttlMillis rounds up, so that the server never holds a lease for less than
// asked: the engine's local deadline assumes at least the full TTL.
func ttlMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
