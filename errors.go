package leasehold

import (
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Sentinel errors, matched with errors.Is. A caller can always tell "someone
// else holds it" (ErrNotAcquired) from "the backend failed" (a wrapped backend
// error) from "my context ended" (the context's error).
//
// Each is the very value the engine returns (a constant inside it): this
// package is where they are documented, and the engine never reads these
// variables, so nothing can change what it reports.
var (
	// ErrNotAcquired: the lease is held by another owner (or by this Manager,
	// which never re-enters) and the wait ran out. A normal outcome, not a fault.
	ErrNotAcquired error = lease.ErrNotAcquired
	// ErrLost: the holding ended without its owner releasing it (no renewal
	// confirmed before the local deadline, or the backend rejected a renewal).
	ErrLost error = lease.ErrLost
	// ErrReleased: the holding was released (by Release, Do or Manager.Close).
	ErrReleased error = lease.ErrReleased
	// ErrInvalidName: a lease name (or the key it normalizes to) is empty or
	// blank, contains NUL, is not UTF-8, or is longer than 200 runes.
	ErrInvalidName error = lease.ErrInvalidName
	// ErrInvalidOption: an option is out of range; nothing was done.
	ErrInvalidOption error = lease.ErrInvalidOption
	// ErrClosed: the Manager is closed.
	ErrClosed error = lease.ErrClosed
	// ErrTokenNotIncreasing: the backend granted a token not above one this
	// Manager has seen for the same name, breaking the fencing promise every
	// backend makes. Acquire releases that grant and returns this error
	// rather than hand out a lease that does not fence off its predecessor.
	ErrTokenNotIncreasing error = lease.ErrTokenNotIncreasing

	// ErrTTLTooShort: the grant came back after the lease's own local
	// deadline (TTL minus the safety margin, counted from the request): the
	// backend's latency used the whole TTL up. The grant is released and
	// Acquire fails; use a longer TTL.
	ErrTTLTooShort error = lease.ErrTTLTooShort

	// ErrLimitMismatch: an Acquire with WithLimit(n) (no WithLimit: 1) on a
	// name whose live holdings were granted under another limit. Every
	// holder of a name must use the same limit; the store refused the
	// attempt and changed nothing. The error is a *LimitMismatchError,
	// naming both limits.
	ErrLimitMismatch error = lease.ErrLimitMismatch

	// ErrStaleToken: a fenced write carried a fencing token lower than the
	// highest its resource has recorded: its lease was taken over, and the
	// guard refused the write so that the newer holder's work stands. The
	// Manager never returns it; the guards of docs/fencing-tokens.md do,
	// as a *StaleTokenError naming both tokens.
	ErrStaleToken = errors.New("leasehold: stale fencing token")
)

// LimitMismatchError is the ErrLimitMismatch of one Acquire: Limit is the
// Acquire's, HeldLimit that of the name's live holdings (1: exclusive).
// Match it with errors.As; errors.Is(err, ErrLimitMismatch) matches too.
type LimitMismatchError = lease.LimitMismatchError

// NotAcquiredError is the ErrNotAcquired a busy lease returns; it says who held
// it when the wait ran out. errors.Is(err, ErrNotAcquired) matches it.
type NotAcquiredError struct {
	Name string
	// Holder is the owner that held the lease ("" if the backend did not say).
	Holder string
	// HolderExpiresAt is when the holder's lease ends unless renewed, on the
	// backend's clock (zero if unknown).
	HolderExpiresAt time.Time
	// Limit is the Acquire's WithLimit, when above 1: every slot was taken
	// (Holder is then the holding that ends first).
	Limit int
	// HeldHere: the holder is this Manager itself. A lease is not
	// re-entrant: a second Acquire of a name the Manager holds is refused
	// until the first lease is released.
	HeldHere bool
}

func (e *NotAcquiredError) Error() string {
	if e.Limit > 1 {
		if e.Holder == "" {
			return fmt.Sprintf("leasehold: lease %q not acquired: no free slot of %d for this waiter", e.Name, e.Limit)
		}
		return fmt.Sprintf("leasehold: lease %q not acquired: all %d slots held; the first to end is %q's, until %s", e.Name, e.Limit, e.Holder, e.HolderExpiresAt.Format(time.RFC3339Nano))
	}
	if e.HeldHere {
		return fmt.Sprintf("leasehold: lease %q not acquired: held by this Manager (owner %q); leases are not re-entrant: use the lease already held, or Release it first", e.Name, e.Holder)
	}
	if e.Holder == "" {
		return fmt.Sprintf("leasehold: lease %q not acquired: held by another owner", e.Name)
	}
	return fmt.Sprintf("leasehold: lease %q not acquired: held by %q until %s", e.Name, e.Holder, e.HolderExpiresAt.Format(time.RFC3339Nano))
}

// Unwrap makes errors.Is(err, ErrNotAcquired) true.
func (e *NotAcquiredError) Unwrap() error { return lease.ErrNotAcquired }

// StaleTokenError is the ErrStaleToken of one refused write: Token is the
// writer's, Highest the highest its resource had recorded. Match it with
// errors.As; errors.Is(err, ErrStaleToken) matches too.
type StaleTokenError struct {
	Resource string
	Token    uint64
	Highest  uint64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("leasehold: stale fencing token for %q: write with token %d refused, token %d was already recorded", e.Resource, e.Token, e.Highest)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }
