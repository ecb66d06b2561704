package leasehold

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/messages"
)

// Lease is one holding of one name: from the grant until Release or loss. A
// new Acquire of the same name gives a new Lease with a new token. Its methods
// are safe for concurrent use.
type Lease struct {
	m *Manager
	h *lease.Holding
	// w is made on first use (Work, Release): a Lease is kept for every
	// lease held, and most never run Work.
	w atomic.Pointer[workSet]
}

// LeaseFrom returns the lease whose Context ctx is or derives from: inside
// Do's function, the lease Do acquired, so that its fencing token is one call
// away. ok is false for any other context.
func LeaseFrom(ctx context.Context) (*Lease, bool) {
	h, ok := lease.HoldingFrom(ctx)
	if !ok {
		return nil, false
	}
	l, ok := h.Handle().(*Lease)
	return l, ok
}

// Name is the name given to Acquire (not the backend key).
func (l *Lease) Name() string { return l.h.Name }

// Owner is the owner identity of the Manager that holds it.
func (l *Lease) Owner() string { return l.h.Owner }

// Token is the fencing token of this holding: greater than every earlier
// holding's token for the same name, unchanged by renewals.
func (l *Lease) Token() uint64 { return l.h.Token }

// ExpiresAt is the backend's expiry (on the backend's clock) as of the last
// confirmed acquire or renewal.
func (l *Lease) ExpiresAt() time.Time { return l.h.ExpiresAt() }

// Context is done when the holding ends; context.Cause is an error wrapping
// ErrLost or ErrReleased. Run the lease-protected work under it.
func (l *Lease) Context() context.Context { return l.h.Context() }

// Lost is closed when the lease is lost (never on Release or Close).
func (l *Lease) Lost() <-chan struct{} { return l.h.Lost() }

// Err is nil while the lease is held, then an error wrapping ErrLost or
// ErrReleased.
func (l *Lease) Err() error { return l.h.Err() }

// Renew extends the lease now, for ttl (0 keeps the acquire TTL) from the
// moment of the request. A ttl the backend cannot keep (outside [1ms,
// MaxTTL], or outside the backend's own limits, backend.Info) is
// ErrInvalidOption, and changes nothing. It returns the handle's error (wrapping ErrReleased or
// ErrLost) without any backend call when the holding has ended, ctx's error
// without any backend call when ctx has ended, an error wrapping ErrLost when
// the backend says the holding is gone, and a wrapped backend error when the
// renewal could not be confirmed (the lease is then still held until its local
// deadline, and auto-renewal keeps trying).
func (l *Lease) Renew(ctx context.Context, ttl time.Duration) error {
	if l.m.closed.Load() {
		return closedErr(l.h)
	}
	if err := l.h.Err(); err != nil {
		return err
	}
	if ttl != 0 {
		// Against the store's own limits too, before anything changes: a
		// shorter TTL lowers the local deadline as the renewal is sent.
		if err := l.m.info.CheckTTL(ttl); err != nil {
			return fmt.Errorf("%w: Renew: %w", ErrInvalidOption, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	reply := make(chan error, 1)
	if !l.m.engine.Send(l.h.Route, &messages.Renew{Key: l.h.Key, Token: l.h.Token, TTL: ttl, Reply: reply}, false) {
		return l.endedErr()
	}
	select {
	case err := <-reply:
		if errors.Is(err, messages.ErrStale) {
			return l.endedErr()
		}
		return err
	case <-l.h.Context().Done():
		return l.h.Err()
	case <-ctx.Done():
		return ctx.Err()
	case <-l.m.engine.Stopped():
		return closedErr(l.h)
	}
}

// StopRenewing turns automatic renewal off: the lease stays held until its
// local deadline and then ends as lost (ReasonExpired), unless Renew or
// Release comes first. It is how a holder steps back without releasing, when
// work done under the lease may still be running (election does this when a
// leader's callback outlives its grace). A renewal already on the wire may
// still be confirmed and move the deadline once. It returns the handle's
// error when the holding has ended, and ctx's error when ctx ends first.
func (l *Lease) StopRenewing(ctx context.Context) error {
	if err := l.h.Err(); err != nil {
		return err
	}
	reply := make(chan error, 1)
	if !l.m.engine.Send(l.h.Route, &messages.StopRenewing{Key: l.h.Key, Token: l.h.Token, Reply: reply}, false) {
		return l.endedErr()
	}
	select {
	case err := <-reply:
		if errors.Is(err, messages.ErrStale) {
			return l.endedErr()
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-l.m.engine.Stopped():
		return closedErr(l.h)
	}
}

// Release gives the lease back. Work started with Work ends first: its
// context is ended, and the store is told only once it has returned (a
// Release from inside that work does not wait for it). The handle then ends
// with ErrReleased, whatever happens next. The release itself runs detached
// from ctx: ctx only bounds how long Release waits, for the work and then for
// the backend's answer. When ctx ends first Release returns ctx's error while
// the release goes on (after the work returns); if the backend cannot
// confirm, the engine retries until the lease's TTL has passed (see
// docs/what-survives-what.md). It is idempotent: on a holding that has
// already ended (released or lost), or is being released, it returns nil
// without any backend call.
func (l *Lease) Release(ctx context.Context) error {
	e := l.works().end(l, ctx, "Release")
	if e == nil {
		return nil // already ended or ending: released, lost or closed
	}
	return l.wait(ctx, e)
}

func (l *Lease) endedErr() error {
	if err := l.h.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: lease %q (token %d)", ErrReleased, l.h.Name, l.h.Token)
}

// closedErr matches both ErrClosed and how the handle ended.
func closedErr(h *lease.Holding) error {
	if err := h.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return ErrClosed
}
