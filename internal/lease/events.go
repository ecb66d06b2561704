package lease

import (
	"sync"
	"time"
)

// Reasons a holding is lost (package leasehold exposes them as LostReason).
const (
	// ReasonExpired: no renewal was confirmed before the local deadline.
	ReasonExpired = 1
	// ReasonRejected: the backend said the holding no longer exists.
	ReasonRejected = 2
)

// Lost describes the end of a holding that its owner did not choose.
type Lost struct {
	Name   string
	Owner  string
	Token  uint64
	Reason int
	At     time.Time
	Err    error
}

// Sink is one subscriber as the event hub sees it. Deliver must not block (the
// subscriber drops and counts what its buffer cannot take); Close runs once,
// on the hub.
type Sink struct {
	Deliver func(Lost)
	close   func()
	once    sync.Once
}

// NewSink makes a sink; closeFn runs at most once.
func NewSink(deliver func(Lost), closeFn func()) *Sink {
	return &Sink{Deliver: deliver, close: closeFn}
}

// Close closes the sink once.
func (s *Sink) Close() { s.once.Do(s.close) }
