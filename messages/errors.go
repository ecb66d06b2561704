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

	// ErrStale answers a Renew for a holding the lease actor no longer has
	// (it ended while the command was on its way); the caller then reports
	// how its handle ended.
	ErrStale = errors.New("leasehold: holding already ended")
)
