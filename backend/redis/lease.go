package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Acquire implements backend.Backend: one acquire script, then, with replica
// confirmation on, WAIT on the same connection. A grant that is not confirmed
// is released (and so handed to the head of the queue, if any; the caller's
// own entry went with the grant) and reported as a fault wrapping
// ErrNotConfirmed. A refused
// request with Wait set marks the holding, so that its release is announced
// (WatchReleases); with a QueueRequest (and the queue on) it also queues the
// attempt, and Grant.Queued says whether it has an entry.
func (b *Backend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	if err := b.closed(); err != nil {
		return backend.Grant{}, err
	}
	t := &acquireTrip{b: b, r: r, names: [1]string{r.Key}}
	if terr := b.roundTripCall(ctx, t.names[:], t); terr != nil {
		return backend.Grant{}, fmt.Errorf("redis: acquire %q: %w", r.Key, terr)
	}
	return t.g, t.err
}

// acquire is Acquire's round trips: the script, and the release of a grant
// too few replicas acknowledged.
func (b *Backend) acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	c := b.runOne(ctx, b.acquireCall(r))
	g, err := b.acquireAnswer(ctx, r, &c)
	if err != nil || !b.unconfirmedGrant(g, &c) {
		return g, err
	}
	b.logUnconfirmed(ctx, r, g.Token, c.acked)
	rr := backend.ReleaseRequest{Key: r.Key, Owner: r.Owner, Attempt: r.Attempt, Token: g.Token}
	rc := b.runOne(ctx, b.releaseCall(rr))
	return b.unconfirmedAnswer(r, c.acked, b.releaseAnswer(ctx, rr, &rc))
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
	t := &renewTrip{b: b, r: r, names: [1]string{r.Key}}
	if terr := b.roundTripCall(ctx, t.names[:], t); terr != nil {
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w", r.Key, terr)
	}
	return t.g, t.err
}

// renew is Renew's round trip.
func (b *Backend) renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	c := b.runOne(ctx, b.renewCall(r))
	return b.renewAnswer(ctx, r, &c)
}

// Release implements backend.Backend. It ends r.Attempt's holding (the one
// with r.Token, or whatever its token when r.Token is 0) and, when one ended
// and a refused attempt waits for it, hands the key to the head of its queue
// (publishing a HandOff to the head's address) or, with nobody queued,
// publishes the key on the release channel (with notifications on). When
// no holding matches, it takes r.Attempt out of the queue.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := b.closed(); err != nil {
		return err
	}
	t := &releaseTrip{b: b, r: r, names: [1]string{r.Key}}
	if terr := b.roundTripCall(ctx, t.names[:], t); terr != nil {
		return fmt.Errorf("redis: release %q: %w", r.Key, terr)
	}
	return t.err
}

// release is Release's round trip.
func (b *Backend) release(ctx context.Context, r backend.ReleaseRequest) error {
	c := b.runOne(ctx, b.releaseCall(r))
	return b.releaseAnswer(ctx, r, &c)
}

// logUnconfirmed says that a grant is given back for want of replicas.
func (b *Backend) logUnconfirmed(ctx context.Context, r backend.AcquireRequest, token uint64, acked int64) {
	b.cfg.logger.WarnContext(ctx, "redis: grant not confirmed by replicas, releasing it",
		"key", r.Key, "token", token, "acked", acked, "wanted", b.cfg.replicas)
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
