package roundtrip

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// Trip is one run of a round trip's fn. When fn has returned (panicked is
// written before), done gets one value if the trip was not abandoned, for
// its one Await; an abandoned trip's gone, made when it is abandoned, is
// closed instead, for every later call on its names. (A value rather than a
// close: a trip that Do saw finish is reused, channel and all.)
type Trip struct {
	done     chan struct{}
	gone     chan struct{}
	panicked any
	// state goes from tripRunning to tripFinished or, when the caller stops
	// waiting first, to tripAbandoned (under abandonedTrips.mu, with names).
	state atomic.Int32
	names []string

	// What to run, until it runs.
	r    *Runner
	ctx  context.Context
	call Call
}

const (
	tripRunning int32 = iota
	tripFinished
	tripAbandoned
)

// abandonedTrips are the trips whose callers stopped waiting, by name, until
// they finish.
type abandonedTrips struct {
	n      atomic.Int64 // names with trips; 0 spares every call the lock
	mu     sync.Mutex
	byName map[string][]*Trip
}

// add records t as abandoned on names, unless it has finished already, and
// reports whether it did.
func (a *abandonedTrips) add(t *Trip, names []string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !t.state.CompareAndSwap(tripRunning, tripAbandoned) {
		return false
	}
	t.gone = make(chan struct{})
	if a.byName == nil {
		a.byName = map[string][]*Trip{}
	}
	t.names = names
	for _, name := range names {
		if len(a.byName[name]) == 0 {
			a.n.Add(1)
		}
		a.byName[name] = append(a.byName[name], t)
	}
	return true
}

// finish tells t's Await that t is done or, if t was abandoned, forgets it
// and closes t.gone: whoever sees t gone sees it forgotten. Only an
// abandoned trip takes the lock.
func (a *abandonedTrips) finish(t *Trip) {
	if t.state.CompareAndSwap(tripRunning, tripFinished) {
		t.done <- struct{}{}
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range t.names {
		ts := slices.DeleteFunc(a.byName[name], func(u *Trip) bool { return u == t })
		if len(ts) == 0 {
			delete(a.byName, name)
			a.n.Add(-1)
		} else {
			a.byName[name] = ts
		}
	}
	close(t.gone)
}

// wait waits until no abandoned trip on names is running, or ctx ends.
func (a *abandonedTrips) wait(ctx context.Context, names []string) error {
	if a.n.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	var pending []*Trip
	for _, name := range names {
		pending = append(pending, a.byName[name]...)
	}
	a.mu.Unlock()
	for _, t := range pending {
		select {
		case <-t.gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
