package engine

import (
	"container/heap"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/lease"
)

// alarms is one Manager's clock for the deadlines that every holding has: its
// next renewal and its local deadline. A heap of alarms ordered by time, and
// one OS timer armed for the earliest, replace a timer per lease: with ten
// thousand leases, arming and firing ten thousand runtime timers (each a
// closure, a message and a goroutine per firing) cost more than the
// renewals themselves. Firing stays exact: the timer is always armed for the
// earliest alarm.
//
// The ticks are sent from a few long-lived goroutines (deliverers): with the
// caller-runs dispatcher the due actors run right there, and a fresh goroutine
// per firing (time.AfterFunc) would grow its stack through the actors again
// every time. Not from the timer's own goroutine (run): a goroutine that
// sends to an idle mailbox runs it until it is empty, and a name under heavy
// contention can keep its mailbox busy for long; a deliverer caught so delays
// only the ticks it was given, not the timer, and the other deliverers go on.
//
// An alarm is owned by one lease, whose actor arms and stops it from its
// Receive; its tick goes to the lease's router entry, which wakes the lease
// if it sleeps (a sleeping lease keeps its alarm, and the actor that wakes it
// takes it up). The tick carries the generation of the arming, so a tick from
// an arming that was replaced while it was on its way is told apart (as with
// timer).
type alarms struct {
	clock   clock.Clock
	deliver func(to *entry, msg any) // Engine.sendTo

	mu      sync.Mutex
	h       alarmHeap
	t       clock.Timer
	armedAt time.Time // of t; zero when t is not armed
	stopped bool

	done    chan struct{} // closed by stop
	running sync.WaitGroup
	ticks   chan tick // to the deliverers
	workers sync.WaitGroup
}

// tick is one alarm's message, on its way to its lease.
type tick struct {
	to  *entry
	msg any
}

// deliverers is how many goroutines of one alarm heap send its ticks.
const deliverers = 4

// alarm is one lease's deadline in alarms.
// (Its fields are packed to 64 bytes: every lease held has one.)
type alarm struct {
	at    time.Time
	gen   uint32 // of the current arming; 0 when not armed
	last  uint32 // generations handed out (0 skipped when it wraps)
	index int    // in the heap; -1 when not in it
	to    *entry
	tick  func(gen uint64) any
	// follow, when set, is a holding whose local deadline the alarm keeps
	// up with: due, it moves to that deadline if it is later, without a
	// tick (the renewer moves a holding's deadline on without telling its
	// actor, which re-arms after moving it itself).
	follow *lease.Holding
}

// newAlarms returns a running alarm heap on clock that hands its ticks to
// deliver.
func newAlarms(clock clock.Clock, deliver func(to *entry, msg any)) *alarms {
	s := &alarms{clock: clock, deliver: deliver, done: make(chan struct{}), t: clock.NewTimer(), ticks: make(chan tick, 1024)}
	s.running.Go(s.run)
	for range deliverers {
		s.workers.Go(func() {
			for t := range s.ticks {
				s.deliver(t.to, t.msg)
			}
		})
	}
	return s
}

// run sends the ticks of due alarms whenever the timer fires, until stop.
func (s *alarms) run() {
	for {
		select {
		case <-s.t.C():
			s.fire()
		case <-s.done:
			return
		}
	}
}

// newAlarm makes an alarm that sends tick(gen) to the lease of entry to.
func newAlarm(to *entry, tick func(gen uint64) any) *alarm {
	return &alarm{index: -1, to: to, tick: tick}
}

// arm (re)sets a to fire at `at`.
func (s *alarms) arm(a *alarm, at time.Time) { s.armFollowing(a, at, nil) }

// armFollowing (re)sets a to fire at `at`, or, when d is set, at d's
// deadline as it is when `at` comes.
func (s *alarms) armFollowing(a *alarm, at time.Time, d *lease.Holding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.follow = d
	if a.last++; a.last == 0 {
		a.last++
	}
	a.gen, a.at = a.last, at
	if a.index < 0 {
		heap.Push(&s.h, a)
	} else {
		heap.Fix(&s.h, a.index)
	}
	s.rearmLocked()
}

// disarm stops a; a tick already on its way is ignored (fired says false).
func (s *alarms) disarm(a *alarm) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.gen = 0
	if a.index >= 0 {
		heap.Remove(&s.h, a.index)
	}
}

// fired reports whether gen is a's current arming, and disarms it. Only a's
// owner calls it, for a tick it received.
func (s *alarms) fired(a *alarm, gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen == 0 || gen != uint64(a.gen) {
		return false
	}
	a.gen = 0
	return true
}

// rearmLocked arms the OS timer for the earliest alarm, if that changed.
func (s *alarms) rearmLocked() {
	if s.stopped || len(s.h) == 0 {
		return
	}
	next := s.h[0].at
	if !s.armedAt.IsZero() && !next.Before(s.armedAt) {
		return // armed for that time or earlier already
	}
	s.armedAt = next
	s.t.ResetAt(next)
}

// fire sends the tick of every alarm that is due and re-arms for the next.
func (s *alarms) fire() {
	var ticks []tick
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	now := s.clock.Now()
	for len(s.h) > 0 && !s.h[0].at.After(now) {
		a := s.h[0]
		if a.follow != nil {
			if at := a.follow.Deadline(); at.After(now) {
				a.at = at
				heap.Fix(&s.h, 0)
				continue
			}
		}
		heap.Pop(&s.h)
		ticks = append(ticks, tick{a.to, a.tick(uint64(a.gen))})
	}
	s.armedAt = time.Time{}
	s.rearmLocked()
	s.mu.Unlock()
	for _, t := range ticks { // outside the lock (a deliverer may be slow)
		s.ticks <- t
	}
}

// stop ends all alarms and waits for ticks being sent.
func (s *alarms) stop() {
	s.mu.Lock()
	s.stopped = true
	s.t.Stop()
	s.mu.Unlock()
	close(s.done)
	s.running.Wait() // run sends no more ticks
	close(s.ticks)
	s.workers.Wait()
}

// alarmHeap orders alarms by time (container/heap).
type alarmHeap []*alarm

func (h alarmHeap) Len() int           { return len(h) }
func (h alarmHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h alarmHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *alarmHeap) Push(x any) {
	a := x.(*alarm)
	a.index = len(*h)
	*h = append(*h, a)
}
func (h *alarmHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	a.index = -1
	*h = old[:len(old)-1]
	return a
}
