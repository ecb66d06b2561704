package lease

import (
	"sync"
	"time"
)

// Reason says why a holding was lost. Package leasehold exports it as
// LostReason, with these constants.
type Reason int

const (
	// ReasonExpired: no renewal was confirmed before the local deadline
	// (backend unreachable, slow, or auto-renewal off).
	ReasonExpired Reason = 1
	// ReasonRejected: the backend said another owner holds the lease or it
	// expired there.
	ReasonRejected Reason = 2
)

func (r Reason) String() string {
	switch r {
	case ReasonExpired:
		return "expired"
	case ReasonRejected:
		return "rejected"
	}
	return "unknown"
}

// WaitForever, as an Acquire's wait, waits until the caller's context ends.
// Package leasehold exports it for WithWait, package messages for
// messages.Acquire.Wait: the one value both hand to the lease actor.
const WaitForever time.Duration = -1

// Lost describes the end of a holding that its owner did not choose.
type Lost struct {
	Name   string
	Owner  string
	Token  uint64
	Reason Reason
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
