// Package poll is the tests' bounded waits. Until checks a condition for
// state that sends no signal (who owns what across partition members, a
// server that is still starting, a store's listener count) until it holds;
// Receive waits for a signal that is a channel. Either fails the test, rather
// than hang, when its wait runs out.
package poll

import (
	"testing"
	"time"
)

// every is how often a condition is checked: often enough that a wait costs
// little beyond the condition's own time, rarely enough not to load the
// machine.
const every = 5 * time.Millisecond

// Until checks cond until it holds and returns how long that took; it fails
// tb, naming what, when cond still does not hold after within.
func Until(tb testing.TB, what string, within time.Duration, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			tb.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(every)
	}
	return time.Since(start)
}

// Receive waits for a value on ch and returns it; it fails tb, naming what,
// when none comes within within.
func Receive[T any](tb testing.TB, what string, within time.Duration, ch <-chan T) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		tb.Fatalf("%s did not happen within %v", what, within)
		var zero T
		return zero
	}
}

// Throughout checks cond every few milliseconds for the span and reports
// whether it held at every check: for a promise that something does not
// happen while a step of the test runs (a store keeps a lease while its
// holder's work winds down). It never fails tb itself, since it may be
// called off the test's goroutine.
func Throughout(span time.Duration, cond func() bool) bool {
	end := time.Now().Add(span)
	for time.Now().Before(end) {
		if !cond() {
			return false
		}
		time.Sleep(every)
	}
	return cond()
}
