package messages

import (
	"errors"
	"strconv"

	"github.com/leasehold/leasehold/internal/lease"
)

// The outcomes the protocol reports. Package leasehold defines the public ones
// (with the same texts) and sets these variables, and lease.ErrLost, to its
// own values at init, so that the engine returns exactly the errors users
// match with errors.Is.
var (
	ErrNotAcquired   = errors.New("leasehold: lease not acquired")
	ErrLost          = lease.ErrLost // a Holding ends with it by itself
	ErrReleased      = errors.New("leasehold: lease released")
	ErrInvalidName   = errors.New("leasehold: invalid lease name")
	ErrInvalidOption = errors.New("leasehold: invalid option")
	ErrClosed        = errors.New("leasehold: manager closed")

	// ErrTokenNotIncreasing: the backend granted a token not above one
	// seen before for the same name (a store that broke its fencing
	// promise). The grant is released and refused.
	ErrTokenNotIncreasing = errors.New("leasehold: fencing token did not increase")

	// ErrTTLTooShort: a grant came back after its own local deadline (the
	// TTL minus the safety margin, counted from the request): the backend's
	// latency used up the whole TTL. The grant is released and refused.
	ErrTTLTooShort = errors.New("leasehold: TTL too short for the backend's latency")

	// ErrStale answers a Renew for a holding the lease actor no longer has
	// (it ended while the command was on its way); the caller then reports
	// how its handle ended.
	ErrStale = errors.New("leasehold: holding already ended")
)

// Released is the error a holding ends with when its owner releases it. It
// is built on every release, so it formats only when read.
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
