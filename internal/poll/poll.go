// Package poll is the tests' one way to wait for state that sends no signal
// (who owns what across partition members, a server that is still starting,
// a store's listener count): it checks a condition until it holds, and fails
// the test, rather than hang, when it does not hold in time.
//
// Anything that does send a signal (a channel, a callback, a lease's Lost)
// is awaited on that signal instead.
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
