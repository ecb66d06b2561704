package lease

import "sync/atomic"

// Ticket settles the race between a grant and a caller giving up: exactly one
// of Claim (by the lease actor, before it hands over a grant) and Abandon (by
// the caller, when its context ends) succeeds. A grant whose Claim fails is
// released at once, so a late grant never leaves an unowned lease behind.
type Ticket struct{ state atomic.Int32 }

const (
	ticketPending int32 = iota
	ticketClaimed
	ticketAbandoned
)

// Claim reports whether the caller is still there to take a grant.
func (t *Ticket) Claim() bool { return t.state.CompareAndSwap(ticketPending, ticketClaimed) }

// Abandon reports whether the caller gave up before any grant was claimed.
func (t *Ticket) Abandon() bool { return t.state.CompareAndSwap(ticketPending, ticketAbandoned) }

// Abandoned reports whether the caller has given up.
func (t *Ticket) Abandoned() bool { return t.state.Load() == ticketAbandoned }
