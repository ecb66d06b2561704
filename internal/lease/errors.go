package lease

import "errors"

// ErrLost: the holding ended without its owner releasing it. Package
// leasehold exports it; it is defined here because a Holding finds a loss by
// itself (its local deadline passed) and ends with it.
var ErrLost = errors.New("leasehold: lease lost")

// ErrDeadlinePassed is the cause of a loss found when the local deadline had
// already passed (no renewal was confirmed in time).
var ErrDeadlinePassed = errors.New("no renewal confirmed before the local deadline")
