package lease

import "fmt"

// ErrLimitMismatch: an Acquire with a limit other than the one the name's
// live holdings were granted under. All holders of a name must agree on its
// limit; the store refused the attempt and changed nothing.
const ErrLimitMismatch Error = "leasehold: lease limit mismatch"

// LimitMismatchError is the ErrLimitMismatch of one Acquire: the limit it
// asked for and the limit the name's live holdings have (1: an exclusive
// holding). errors.Is(err, ErrLimitMismatch) matches it.
type LimitMismatchError struct {
	Name      string
	Limit     int // the Acquire's (1: exclusive)
	HeldLimit int // the live holdings'
}

func (e *LimitMismatchError) Error() string {
	return fmt.Sprintf("leasehold: acquire %q with limit %d: its live holdings were granted with limit %d (every holder of a name must use the same limit)",
		e.Name, e.Limit, e.HeldLimit)
}

// Unwrap makes errors.Is(err, ErrLimitMismatch) true.
func (e *LimitMismatchError) Unwrap() error { return ErrLimitMismatch }
