package redis

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// # Every call ends with its context
//
// go-redis ignores the cancellation of a command's context: only a deadline
// reaches the socket, and only with ContextTimeoutEnabled. A link that
// silently stops answering (a partition, a frozen server) holds a read until
// the client's ReadTimeout, or for ever without one. So each call's round
// trips run on one of the backend's I/O goroutines while the caller waits for
// them or for its context, whichever ends first. When the context ends first
// the call returns the context's error at once and the command already sent
// holds its connection until the client's own bound ends the read (the
// context's deadline with ContextTimeoutEnabled, else ReadTimeout); go-redis
// then closes that connection rather than reuse it, since its reply may still
// arrive.

// ioIdle is how long an I/O goroutine waits for more work before it ends:
// long enough to serve a steady stream of calls on a few warm goroutines (a
// fresh goroutine grows its stack through the client library each time).
const ioIdle = time.Second

// roundTrip runs fn, the round trips of one call on names and the reading of
// their replies, on an I/O goroutine and waits for it or for ctx. It returns
// nil when fn has returned before ctx ended, and ctx's error otherwise: a
// deadline that has passed counts even before the context says so, since a
// socket read that timed out at the deadline is the context's doing, and an
// answer that came as the context ended is not one the caller waited for.
// After an error fn may still be running: the caller must not read what fn
// writes. With a context that can never end, fn runs on the caller's
// goroutine.
//
// A request abandoned so may still reach the server. A later call on one of
// its names first waits for it to finish (within the later call's own
// context), so that the server runs the two in the order they were made:
// the engine's clean-up release after an abandoned acquire must not overtake
// it, or the acquire would grant a name nobody holds.
func (b *Backend) roundTrip(ctx context.Context, names []string, fn func(ctx context.Context)) error {
	if err := b.abandoned.wait(ctx, names); err != nil {
		return err
	}
	if ctx.Done() == nil {
		fn(ctx)
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.awaitTrip(ctx, b.startTrip(ctx, fn), names); err != nil {
		return err
	}
	return ended(ctx)
}

// startTrip runs fn on an I/O goroutine; awaitTrip waits for it. Several
// trips started together run in parallel (the masters of a Cluster). The
// caller waits for the abandoned trips on their names first (roundTrip).
func (b *Backend) startTrip(ctx context.Context, fn func(ctx context.Context)) *trip {
	t := &trip{done: make(chan struct{})}
	b.io.run(func() {
		defer b.abandoned.finish(t)
		defer func() { t.panicked = recover() }()
		fn(ctx)
	})
	return t
}

// awaitTrip waits until t has finished, and returns nil, or until ctx ends,
// and returns its error, recording t as abandoned on names. A trip that has
// finished counts as finished, even once ctx has ended.
func (b *Backend) awaitTrip(ctx context.Context, t *trip, names []string) error {
	select {
	case <-t.done:
	default:
		select {
		case <-t.done:
		case <-ctx.Done():
			b.abandoned.add(t, names)
			return ctx.Err()
		}
	}
	if t.panicked != nil {
		panic(t.panicked) // the caller's, as if fn had run there
	}
	return nil
}

// trip is one roundTrip's run of fn: done is closed when fn has returned
// (panicked is written before).
type trip struct {
	done     chan struct{}
	panicked any
	// state goes from tripRunning to tripFinished or, when the caller stops
	// waiting first, to tripAbandoned (under abandonedTrips.mu, with names).
	state atomic.Int32
	names []string
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
	byName map[string][]*trip
}

// add records t as abandoned on names, unless it has finished already.
func (a *abandonedTrips) add(t *trip, names []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !t.state.CompareAndSwap(tripRunning, tripAbandoned) {
		return
	}
	if a.byName == nil {
		a.byName = map[string][]*trip{}
	}
	t.names = names
	for _, name := range names {
		if len(a.byName[name]) == 0 {
			a.n.Add(1)
		}
		a.byName[name] = append(a.byName[name], t)
	}
}

// finish closes t.done, having forgotten t if it was abandoned: whoever sees
// t done sees it forgotten. Only an abandoned trip takes the lock.
func (a *abandonedTrips) finish(t *trip) {
	if t.state.CompareAndSwap(tripRunning, tripFinished) {
		close(t.done)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range t.names {
		ts := slices.DeleteFunc(a.byName[name], func(u *trip) bool { return u == t })
		if len(ts) == 0 {
			delete(a.byName, name)
			a.n.Add(-1)
		} else {
			a.byName[name] = ts
		}
	}
	close(t.done)
}

// wait waits until no abandoned trip on names is running, or ctx ends.
func (a *abandonedTrips) wait(ctx context.Context, names []string) error {
	if a.n.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	var pending []*trip
	for _, name := range names {
		pending = append(pending, a.byName[name]...)
	}
	a.mu.Unlock()
	for _, t := range pending {
		select {
		case <-t.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// ended returns ctx's error, or context.DeadlineExceeded once its deadline
// has passed, or nil.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// ioPool is the backend's I/O goroutines: as many as calls in flight need,
// each ending after ioIdle without work, or when the backend closes.
type ioPool struct {
	work    chan func()
	closing <-chan struct{}
}

func newIOPool(closing <-chan struct{}) *ioPool {
	return &ioPool{work: make(chan func()), closing: closing}
}

// run hands fn to an idle I/O goroutine, or to a new one when none is idle.
func (p *ioPool) run(fn func()) {
	select {
	case p.work <- fn:
	default:
		go p.serve(fn)
	}
}

func (p *ioPool) serve(fn func()) {
	idle := time.NewTimer(ioIdle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(ioIdle)
		select {
		case fn = <-p.work:
		case <-idle.C:
			return
		case <-p.closing:
			return
		}
	}
}
