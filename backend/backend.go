package backend

import (
	"context"
	"errors"
	"time"
)

// Info describes a backend.
type Info struct {
	// Name is a short identifier such as "redis" or "memory".
	Name string
	// ProcessLocal is true when leases are only visible inside this process.
	ProcessLocal bool
}

// Backend is a lease store. Implementations must be safe for concurrent use.
//
// Expiry is always decided by the store's own clock. Tokens are fencing tokens:
// every new grant of a key gets a token strictly greater than every earlier
// grant of that key; a renewal or the same owner's repeated acquire of a live
// holding keeps the token. Tokens are never 0.
type Backend interface {
	Info() Info

	// Acquire grants Key to Owner for TTL when it is free, expired, or already
	// held by Owner (then the holding is refreshed and keeps its token, so an
	// acquire retried after an ambiguous failure is idempotent). When another
	// owner holds it, Acquire returns Grant{Acquired: false, Holder,
	// HolderExpiresAt} and a nil error: being busy is not a fault.
	Acquire(ctx context.Context, r AcquireRequest) (Grant, error)

	// Renew extends the holding of (Key, Owner, Token) to now+TTL. It returns an
	// error wrapping ErrNotHeld when that holding no longer exists (released,
	// expired or taken over).
	Renew(ctx context.Context, r RenewRequest) (Grant, error)

	// Release ends the holding of (Key, Owner, Token). It returns nil also when
	// nothing matching was held. Token 0 releases whatever Owner holds under
	// Key: the engine uses it to clean up after an acquire whose outcome it
	// could not learn (an owner never holds a key twice, so this is safe).
	Release(ctx context.Context, r ReleaseRequest) error

	// Close releases the backend's own resources (not the leases, and not
	// clients that were handed to its constructor).
	Close() error
}

// AcquireRequest asks for Key on behalf of Owner.
type AcquireRequest struct {
	Key      string
	Owner    string
	TTL      time.Duration
	Metadata string
}

// RenewRequest extends one holding.
type RenewRequest struct {
	Key   string
	Owner string
	Token uint64
	TTL   time.Duration
}

// ReleaseRequest ends one holding. Token 0 matches any token of Owner.
type ReleaseRequest struct {
	Key   string
	Owner string
	Token uint64
}

// Grant is the outcome of Acquire or Renew.
type Grant struct {
	// Acquired reports whether the caller holds the key now.
	Acquired bool
	// Token is the fencing token of the caller's holding (when Acquired).
	Token uint64
	// ExpiresAt is the caller's expiry on the store's clock (when Acquired).
	ExpiresAt time.Time
	// Holder is the current owner when not Acquired ("" if unknown).
	Holder string
	// HolderExpiresAt is when the current holder's lease ends, on the
	// store's clock (when not Acquired).
	HolderExpiresAt time.Time
}

// ErrNotHeld is returned (wrapped) by Renew when the holding no longer exists.
var ErrNotHeld = errors.New("lease not held by this owner and token")

// ErrInvalidRequest is returned (wrapped) for a request that breaks the limits
// below; the store is left untouched.
var ErrInvalidRequest = errors.New("invalid lease request")
