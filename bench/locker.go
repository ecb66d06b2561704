package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// errNotAcquired is what a locker returns when its wait for a name ran out
// (a normal outcome under contention, not a fault).
var errNotAcquired = errors.New("not acquired")

// locker is one contender library as the harness drives it: one per worker
// process, shared by its goroutines.
type locker interface {
	// acquire takes name, waiting as the run's wait policy says. It returns
	// errNotAcquired when the wait ran out, ctx's error when ctx ended.
	acquire(ctx context.Context, name string) (holding, error)
	// stats are the locker's counters so far.
	stats() *lockStats
	// close ends the locker's resources (releasing what it still holds).
	close(ctx context.Context) error
}

// holding is one grant as the harness sees it.
type holding interface {
	// token is the fencing token, or 0 for a lock that has none.
	token() uint64
	// lost is closed when the lock learns that the holding ended without a
	// release; nil for a lock that cannot tell.
	lost() <-chan struct{}
	// held is the lock's own answer to "do I still hold it?".
	held() bool
	// release gives the name back; notHeld reports that the lock found it no
	// longer held (a loss noticed only at release).
	release(ctx context.Context) (notHeld bool, err error)
}

// lockStats counts what a locker did, for the report. Safe for concurrent use.
type lockStats struct {
	roundTrips    atomic.Uint64 // calls to the store
	renewals      atomic.Uint64 // leases renewed (a batch counts each of its renewals)
	notifyWakes   atomic.Uint64 // retries of a waiter woken by a release notification
	pollWakes     atomic.Uint64 // retries of a waiter woken by its own timer
	notifications atomic.Uint64 // release notifications received

	mu       sync.Mutex
	losses   map[string]uint64
	handoffs *handoffCounts // nil: not counted (a peer, or an engine without the counter)
}

// handoffCounts are the engine's grants to waiters by the way the waiter
// learned of them: its counter "leasehold.handoffs" by the attribute
// "leasehold.handoff.via".
type handoffCounts struct {
	Notice uint64 // a hand-off notice woke the waiter
	// Poll is the fallback: the waiter's own poll found the name, after an
	// expiry or a lost notice. The report calls these fallback wakes.
	Poll uint64
}

// setHandoffs records the engine's hand-off counts at the end of a run.
func (s *lockStats) setHandoffs(h *handoffCounts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handoffs = h
}

// loss counts one holding lost for reason.
func (s *lockStats) loss(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.losses == nil {
		s.losses = map[string]uint64{}
	}
	s.losses[reason]++
}

// snapshot copies the counters into a lockCounts.
func (s *lockStats) snapshot() lockCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := make(map[string]uint64, len(s.losses))
	for k, v := range s.losses {
		l[k] = v
	}
	c := lockCounts{
		RoundTrips:    s.roundTrips.Load(),
		NotifyWakes:   s.notifyWakes.Load(),
		PollWakes:     s.pollWakes.Load(),
		Notifications: s.notifications.Load(),
		Losses:        l,
	}
	if s.handoffs != nil {
		h := *s.handoffs
		c.Handoffs = &h
	}
	return c
}

// lockCounts is a snapshot of lockStats, sent from worker to parent.
type lockCounts struct {
	RoundTrips, NotifyWakes, PollWakes, Notifications uint64
	Losses                                            map[string]uint64
	Handoffs                                          *handoffCounts // nil: not counted
}

// add sums o into c.
func (c *lockCounts) add(o lockCounts) {
	c.RoundTrips += o.RoundTrips
	c.NotifyWakes += o.NotifyWakes
	c.PollWakes += o.PollWakes
	c.Notifications += o.Notifications
	if o.Handoffs != nil {
		if c.Handoffs == nil {
			c.Handoffs = &handoffCounts{}
		}
		c.Handoffs.Notice += o.Handoffs.Notice
		c.Handoffs.Poll += o.Handoffs.Poll
	}
	for k, v := range o.Losses {
		if c.Losses == nil {
			c.Losses = map[string]uint64{}
		}
		c.Losses[k] += v
	}
}
