package messages

import "errors"

// The outcomes the protocol reports. Package leasehold re-exports them; they are
// defined here because the actors produce them.
var (
	ErrNotAcquired   = errors.New("leasehold: lease not acquired")
	ErrLost          = errors.New("leasehold: lease lost")
	ErrReleased      = errors.New("leasehold: lease released")
	ErrInvalidName   = errors.New("leasehold: invalid lease name")
	ErrInvalidOption = errors.New("leasehold: invalid option")
	ErrClosed        = errors.New("leasehold: manager closed")

	// ErrTokenNotIncreasing: the backend granted a token not above one
	// seen before for the same name (a store that broke its fencing
	// promise). The grant is released and refused.
	ErrTokenNotIncreasing = errors.New("leasehold: fencing token did not increase")

	// ErrStale answers a Renew for a holding the lease actor no longer has
	// (it ended while the command was on its way); the caller then reports
	// how its handle ended.
	ErrStale = errors.New("leasehold: holding already ended")
)
