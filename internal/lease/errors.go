package lease

// Error is the type of the engine's errors: constants, so that nothing can
// reassign them, matched with errors.Is (or ==) against these very values.
// Each is defined here once; package leasehold exports the user-facing ones
// as its sentinels and package messages names them as the outcomes of its
// protocol, both with these values.
type Error string

func (e Error) Error() string { return string(e) }

// The outcomes the engine reports. Package leasehold documents what each
// means to a caller.
const (
	ErrNotAcquired   Error = "leasehold: lease not acquired"
	ErrLost          Error = "leasehold: lease lost" // a Holding also finds a loss by itself (its local deadline passed)
	ErrReleased      Error = "leasehold: lease released"
	ErrInvalidName   Error = "leasehold: invalid lease name"
	ErrInvalidOption Error = "leasehold: invalid option"
	ErrClosed        Error = "leasehold: manager closed"

	// ErrTokenNotIncreasing: the backend granted a token not above one
	// seen before for the same name (a store that broke its fencing
	// promise). The grant is released and refused.
	ErrTokenNotIncreasing Error = "leasehold: fencing token did not increase"

	// ErrTTLTooShort: a grant came back after its own local deadline (the
	// TTL minus the safety margin, counted from the request): the backend's
	// latency used up the whole TTL. The grant is released and refused.
	ErrTTLTooShort Error = "leasehold: TTL too short for the backend's latency"

	// ErrStale answers a command for a holding the lease actor no longer
	// has (it ended while the command was on its way); the caller then
	// reports how its handle ended.
	ErrStale Error = "leasehold: holding already ended"

	// ErrDeadlinePassed is the cause of a loss found when the local
	// deadline had already passed (no renewal was confirmed in time).
	ErrDeadlinePassed Error = "no renewal confirmed before the local deadline"
)
