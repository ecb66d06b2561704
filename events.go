package leasehold

import (
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// LostReason says why a lease was lost. Its String method names it
// ("expired", "rejected", "unknown").
type LostReason = lease.Reason

const (
	// ReasonExpired: no renewal was confirmed before the local deadline
	// (backend unreachable, slow, or auto-renewal off).
	ReasonExpired = lease.ReasonExpired
	// ReasonRejected: the backend said another owner holds the lease or it
	// expired there.
	ReasonRejected = lease.ReasonRejected
)

// LostEvent reports the loss of a lease.
type LostEvent struct {
	Name   string
	Owner  string
	Token  uint64
	Reason LostReason
	At     time.Time
	// Err is the handle's error (wrapping ErrLost and the cause).
	Err error
}

// LeaseInfo describes a lease held now.
type LeaseInfo struct {
	Name      string
	Owner     string
	Token     uint64
	ExpiresAt time.Time
	Metadata  string
	// Limit is the limit the holding was granted under (WithLimit; 1:
	// exclusive).
	Limit int
}

// Subscription receives LostEvents. Close it when no longer needed.
type Subscription struct {
	events      chan LostEvent
	dropped     atomic.Uint64
	sink        *lease.Sink
	unsubscribe func()
}

func newSubscription(buffer int) *Subscription {
	s := &Subscription{events: make(chan LostEvent, buffer)}
	s.sink = lease.NewSink(s.deliver, func() { close(s.events) })
	return s
}

// deliver runs on the event hub; it never blocks.
func (s *Subscription) deliver(e lease.Lost) {
	select {
	case s.events <- LostEvent{Name: e.Name, Owner: e.Owner, Token: e.Token, Reason: e.Reason, At: e.At, Err: e.Err}:
	default:
		s.dropped.Add(1)
	}
}

// Events delivers the loss events; it is closed by Close or Manager.Close.
func (s *Subscription) Events() <-chan LostEvent { return s.events }

// Dropped counts events not delivered because the buffer was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close stops the subscription; Events is closed soon after. Idempotent.
func (s *Subscription) Close() {
	if s.unsubscribe != nil {
		s.unsubscribe()
	}
}
