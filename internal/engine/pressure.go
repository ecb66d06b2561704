package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/clock"
)

// pressure is how a Manager puts its held leases before new ones: while
// renewals are answered late, new acquires wait. The renewer judges it at
// each batch's answers: a renewal answered more than half of its slack late
// (the time from its due time to its local deadline) means the process, or
// the store, no longer keeps up with the renewals, and every lease granted
// now would add to that load while the leases already held are lost one
// after another. It is judged at the answer, not when the renewal goes: the
// timer sends on time while the calls queue behind it.
//
// Its one writer is the renewer; Acquire reads it.
type pressure struct {
	// until is when acquires may go again, as nanoseconds of the engine
	// clock's Unix time; 0 while renewals keep up.
	until atomic.Int64
}

// pressureHold is how long one late firing holds acquires back: a few
// renewer slots, so that the hold lasts exactly as long as renewals keep
// going out late and lapses on its own when none is due.
const pressureHold = 5 * slotWidth

// judge records the answers to one batch at now: late says whether a
// renewal was answered more than half its slack late, answered whether any
// was answered at all.
func (p *pressure) judge(now time.Time, late, answered bool) {
	switch {
	case late:
		p.until.Store(now.Add(pressureHold).UnixNano())
	case answered:
		p.until.Store(0)
	}
}

// lateAt reports whether s, answered at now, came more than half its slack
// late.
func (s *sentRenewal) lateAt(now time.Time) bool {
	late := now.Sub(s.Due)
	return late > 0 && late > s.Deadline.Sub(s.Due)/2
}

// admit waits, under ctx, until acquires may go (at once while renewals keep
// up). It returns ctx's error when ctx ends first.
func (p *pressure) admit(ctx context.Context, clock clock.Clock) error {
	for {
		u := p.until.Load()
		if u == 0 {
			return nil
		}
		d := time.Unix(0, u).Sub(clock.Now())
		if d <= 0 {
			return nil
		}
		woken := make(chan struct{})
		stop := clock.AfterFunc(d, func() { close(woken) })
		select {
		case <-woken:
		case <-ctx.Done():
			stop()
			return ctx.Err()
		}
	}
}

// Behind reports whether new acquires are being held back now.
func (p *pressure) behind(clock clock.Clock) bool {
	u := p.until.Load()
	return u != 0 && time.Unix(0, u).After(clock.Now())
}
