package actors

import (
	"os"
	"slices"
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when a test says. Its timers never
// fire by themselves. A model test with one timer (a renewer or an alarm
// heap) reads when it is armed and calls the owner's fire at that time; a
// test of a whole engine calls advance, which fires every timer and
// AfterFunc due on the way, in order of time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timer  *fakeTimer   // the latest made (the model tests make one)
	timers []*fakeTimer // all made
	funcs  []*fakeFunc  // AfterFuncs not yet run nor stopped
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

// NewTimer returns a new timer; its C receives only from advance.
func (c *fakeClock) NewTimer() Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, c.timer)
	return c.timer
}

// fakeFunc is one AfterFunc.
type fakeFunc struct {
	at time.Time
	f  func()
}

// AfterFunc records f, to be run by advance (on the test's goroutine) once
// the clock reaches now+d.
func (c *fakeClock) AfterFunc(d time.Duration, f func()) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ff := &fakeFunc{at: c.now.Add(max(d, 0)), f: f}
	c.funcs = append(c.funcs, ff)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.funcs = slices.DeleteFunc(c.funcs, func(g *fakeFunc) bool { return g == ff })
	}
}

// armed is when the latest timer is armed for (ok false: it is not).
func (c *fakeClock) armed() (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timer.at, c.timer.on
}

// advance moves the clock on by d, stopping at every due timer and
// AfterFunc on the way, earliest first: a timer then fires (its C
// receives), an AfterFunc runs here. Something armed while it runs, for a
// time within d, fires too.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next time.Time
		var t *fakeTimer
		var f *fakeFunc
		for _, x := range c.timers {
			if x.on && !x.at.After(end) && (next.IsZero() || x.at.Before(next)) {
				next, t = x.at, x
			}
		}
		for _, x := range c.funcs {
			if !x.at.After(end) && (next.IsZero() || x.at.Before(next)) {
				next, t, f = x.at, nil, x
			}
		}
		if t == nil && f == nil {
			if end.After(c.now) {
				c.now = end
			}
			c.mu.Unlock()
			return
		}
		if next.After(c.now) {
			c.now = next
		}
		now := c.now
		if t != nil {
			t.on = false
			select {
			case t.ch <- now:
			default: // one tick is pending already, as with a runtime timer
			}
		} else {
			c.funcs = slices.DeleteFunc(c.funcs, func(g *fakeFunc) bool { return g == f })
		}
		c.mu.Unlock()
		if f != nil {
			f.f()
		}
	}
}

type fakeTimer struct {
	c  *fakeClock
	ch chan time.Time
	at time.Time
	on bool
}

// C receives only when advance fires the timer: the model tests fire for
// the timer themselves.
func (t *fakeTimer) C() <-chan time.Time { return t.ch }

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

// fireAt moves the clock to when the latest timer is armed (or leaves it
// where it is, if that has passed, as a timer armed for the past fires at
// once) and disarms the timer, as a real one is once it has fired. It
// reports false when the timer is not armed.
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
