package messages

import "github.com/leasehold/leasehold/internal/lease"

// The state the messages carry, shared outside the message flow (defined in
// the engine, named here so that a sender can use it):

// Holding is one holding of one key, from grant to release or loss: the
// lease actor writes it (AcquireReply.Holding), its holder reads it.
type Holding = lease.Holding

// Ticket settles a grant racing a caller who gives up: the caller of an
// Acquire Abandons it when it stops waiting, the lease actor Claims it
// before it hands a grant over (a zero Ticket is ready to use).
type Ticket = lease.Ticket

// Sink is one subscriber of loss events (NewSink makes one).
type Sink = lease.Sink

// NewSink makes a subscriber: deliver is called on the event hub for every
// loss and must not block; closeFn runs at most once, when it is closed.
func NewSink(deliver func(Lost), closeFn func()) *Sink { return lease.NewSink(deliver, closeFn) }

// Lost describes the end of a holding that its owner did not choose.
type Lost = lease.Lost

// Reason says why a holding was lost.
type Reason = lease.Reason

// The reasons of a loss.
const (
	ReasonExpired  = lease.ReasonExpired
	ReasonRejected = lease.ReasonRejected
)
