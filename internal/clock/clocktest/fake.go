// Package clocktest is a clock.Clock that moves only when a test says.
package clocktest

import (
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/clock"
)

// Fake is a clock.Clock that moves only when a test says (the engine runs
// on the system's; the model tests and the lease actor's transition table
// run on this one). Its timers never
// fire by themselves. A model test with one timer (a renewer or an alarm
// heap) reads when it is armed and calls the owner's fire at that time; a
// test of a whole engine calls advance, which fires every timer and
// AfterFunc due on the way, in order of time.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timer  *fakeTimer   // the latest made (the model tests make one)
	timers []*fakeTimer // all made
	funcs  []*fakeFunc  // AfterFuncs not yet run nor stopped
}

// New returns a Fake at the system's now.
func New() *Fake { return &Fake{now: time.Now()} }

func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (never back).
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// NewTimer returns a new timer; its C receives only from advance.
func (c *Fake) NewTimer() clock.Timer {
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
func (c *Fake) AfterFunc(d time.Duration, f func()) (stop func()) {
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

// Armed is when the latest timer is armed for (ok false: it is not).
func (c *Fake) Armed() (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timer.at, c.timer.on
}

// Advance moves the clock on by d, stopping at every due timer and
// AfterFunc on the way, earliest first: a timer then fires (its C
// receives), an AfterFunc runs here. Something armed while it runs, for a
// time within d, fires too.
func (c *Fake) Advance(d time.Duration) {
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
	c  *Fake
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

// FireAt moves the clock to when the latest timer is armed (or leaves it
// where it is, if that has passed, as a timer armed for the past fires at
// once) and disarms the timer, as a real one is once it has fired. It
// reports false when the timer is not armed.
func (c *Fake) FireAt() (now time.Time, ok bool) {
	at, ok := c.Armed()
	if !ok {
		return time.Time{}, false
	}
	c.Set(at)
	c.timer.Stop()
	return c.Now(), true
}

// Waiting is how many AfterFuncs wait to run.
func (c *Fake) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.funcs)
}
