package engine

import (
	"os"
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when a test says. Its timer never
// fires by itself: the test reads when it is armed and calls the owner's fire
// at that time, so nothing waits for the OS.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	timer *fakeTimer
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// set moves the clock to t (never back).
func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// NewTimer returns the clock's one timer (a renewer or an alarm heap has one).
func (c *fakeClock) NewTimer() Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = &fakeTimer{c: c}
	return c.timer
}

// armed is when the timer is armed for (ok false: it is not).
func (c *fakeClock) armed() (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timer.at, c.timer.on
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	on bool
}

// C never receives: the test fires for the timer.
func (t *fakeTimer) C() <-chan time.Time { return nil }

func (t *fakeTimer) ResetAt(at time.Time) {
	t.c.mu.Lock()
	t.at, t.on = at, true
	t.c.mu.Unlock()
}

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	t.on = false
	t.c.mu.Unlock()
}

// fireAt moves the clock to when the timer is armed (or leaves it where it
// is, if that has passed, as a timer armed for the past fires at once) and
// disarms the timer, as a real one is once it has fired. It reports false
// when the timer is not armed.
func (c *fakeClock) fireAt() (now time.Time, ok bool) {
	at, ok := c.armed()
	if !ok {
		return time.Time{}, false
	}
	c.set(at)
	c.timer.Stop()
	return c.Now(), true
}

// modelRuns is how many random sequences a model test runs, and how long
// each is: a short run in every test run, a long one with
// LEASEHOLD_MODEL_LONG=1 (make model-long).
func modelRuns() (sequences, steps int) {
	if os.Getenv("LEASEHOLD_MODEL_LONG") == "1" {
		return 5000, 2000
	}
	return 300, 300
}
