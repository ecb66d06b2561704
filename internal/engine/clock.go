package engine

import "time"

// Clock is the time the renewer and the alarm heaps keep: what they read as
// now, and the one timer each arms. The engine runs on the system's
// (systemClock); the model tests (renewer_model_test.go, alarms_model_test.go)
// drive a fake one, firing at the armed time without an OS timer. It is meant
// to become the Config's clock once the lease actors' timers and waiters read
// it too.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that is not armed.
	NewTimer() Timer
}

// Timer is a Clock's re-armable timer.
type Timer interface {
	// C receives the time when the timer fires.
	C() <-chan time.Time
	// ResetAt arms the timer for at (at once if at has passed), replacing
	// any earlier arming.
	ResetAt(at time.Time)
	Stop()
}

// systemClock is the system's monotonic clock and its runtime timers.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer() Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return systemTimer{t}
}

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }

// ResetAt resets the runtime timer: since Go 1.23 no stale tick survives a
// Reset.
func (s systemTimer) ResetAt(at time.Time) { s.t.Reset(max(time.Until(at), 0)) }
func (s systemTimer) Stop()                { s.t.Stop() }
