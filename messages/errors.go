package messages

import (
	"strconv"

	"github.com/leasehold/leasehold/internal/lease"
)

// Error is the type of the outcomes the protocol reports. They are
// constants, defined once (package leasehold exports the same values as its
// sentinel errors): match them with errors.Is, through any wrapping.
type Error = lease.Error

// The outcomes the protocol reports, in replies and in the errors a Holding
// ends with.
const (
	// ErrNotAcquired: the key is held by another owner (AcquireReply.Holder
	// says who) and the wait ran out.
	ErrNotAcquired = lease.ErrNotAcquired
	// ErrLost: a holding ended without its owner releasing it (a Holding
	// also ends with it by itself when its local deadline passes).
	ErrLost = lease.ErrLost
	// ErrReleased: a holding ended because its owner released it.
	ErrReleased = lease.ErrReleased
	// ErrInvalidName: a name or key the engine cannot use.
	ErrInvalidName = lease.ErrInvalidName
	// ErrInvalidOption: an option out of range; nothing was done.
	ErrInvalidOption = lease.ErrInvalidOption
	// ErrClosed: Shutdown has been handled; nothing more is done.
	ErrClosed = lease.ErrClosed

	// ErrTokenNotIncreasing: the backend granted a token not above one
	// seen before for the same name (a store that broke its fencing
	// promise). The grant is released and refused.
	ErrTokenNotIncreasing = lease.ErrTokenNotIncreasing

	// ErrTTLTooShort: a grant came back after its own local deadline (the
	// TTL minus the safety margin, counted from the request): the backend's
	// latency used up the whole TTL. The grant is released and refused.
	ErrTTLTooShort = lease.ErrTTLTooShort

	// ErrStale answers a Renew or StopRenewing for a holding the lease
	// actor no longer has (it ended while the command was on its way); the
	// caller then reports how its handle ended.
	ErrStale = lease.ErrStale

	// ErrLimitMismatch: an Acquire's Limit differs from the one the key's
	// live holdings were granted under (as *LimitMismatchError); nothing
	// was done.
	ErrLimitMismatch = lease.ErrLimitMismatch
)

// LimitMismatchError is the ErrLimitMismatch of one Acquire, naming both
// limits.
type LimitMismatchError = lease.LimitMismatchError

// Released is the error a holding ends with when its owner releases it
// (wrapping ErrReleased). It is built on every release, so it formats only
// when read.
func Released(name string, token uint64) error {
	return &endedError{kind: ErrReleased, name: name, token: token}
}

type endedError struct {
	kind  error
	name  string
	token uint64
}

func (e *endedError) Error() string {
	return e.kind.Error() + ": lease " + strconv.Quote(e.name) + " (token " + strconv.FormatUint(e.token, 10) + ")"
}

func (e *endedError) Unwrap() error { return e.kind }
