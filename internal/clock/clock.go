// Package clock is the time an engine keeps: the Clock interface its lease
// actors, renewer and alarms read and arm, and the system's clock behind it.
// Tests drive the fake one in clocktest.
package clock

import "time"

// Clock is the one time an engine keeps: what the lease actors, the renewer
// and the alarm heaps read as now, the timer each renewer and alarm heap
// arms, and the lease actors' own timers (retries, wait timeouts). The
// engine runs on the system's (System); tests drive a fake one
// (clocktest.Fake), firing at the armed time without an OS timer.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that is not armed.
	NewTimer() Timer
	// AfterFunc calls f once d has passed (at once if d <= 0), on a
	// goroutine of its own, unless stop is called first. f must not block.
	AfterFunc(d time.Duration, f func()) (stop func())
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

// System is the system's monotonic clock and its runtime timers.
type System struct{}

func (System) Now() time.Time { return time.Now() }

func (System) AfterFunc(d time.Duration, f func()) (stop func()) {
	t := time.AfterFunc(d, f)
	return func() { t.Stop() }
}

func (System) NewTimer() Timer {
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
