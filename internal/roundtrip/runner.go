package roundtrip

import (
	"context"
	"sync"
	"time"
)

// idle is how long an I/O goroutine waits for more work before it ends (it
// ends between one and two idle periods after its last round trip): long
// enough to serve a steady stream of calls on a few warm goroutines (a fresh
// goroutine grows its stack through the client library each time).
const idle = time.Second

// Runner runs round trips that end with their callers' contexts. The zero
// value is not usable: use New.
type Runner struct {
	io        pool
	abandoned abandonedTrips
}

// New returns a Runner whose idle I/O goroutines end when closing is closed
// (a round trip running then still finishes).
func New(closing <-chan struct{}) *Runner {
	return &Runner{io: pool{work: make(chan *Trip), closing: closing}}
}

// Do runs fn, the round trips of one call on names and the reading of their
// replies, on an I/O goroutine and waits for it or for ctx. It returns nil
// when fn has returned before ctx ended, and ctx's error otherwise: a
// deadline that has passed counts even before the context says so, since a
// socket read that timed out at the deadline is the context's doing, and an
// answer that came as the context ended is not one the caller waited for.
// After an error fn may still be running: the caller must not read what fn
// writes. With a context that can never end, fn runs on the caller's
// goroutine.
func (r *Runner) Do(ctx context.Context, names []string, fn func(ctx context.Context)) error {
	return r.DoCall(ctx, names, funcCall(fn))
}

// A Call is a round trip that carries its own arguments and results: a call
// made as one struct with a Run method costs one allocation, where a closure
// that writes results it captured costs one for the closure and one per
// result.
type Call interface{ Run(ctx context.Context) }

// funcCall is a func as a Call.
type funcCall func(ctx context.Context)

func (f funcCall) Run(ctx context.Context) { f(ctx) }

// DoCall is Do with c.Run as fn.
func (r *Runner) DoCall(ctx context.Context, names []string, c Call) error {
	if err := r.Wait(ctx, names); err != nil {
		return err
	}
	if ctx.Done() == nil {
		c.Run(ctx)
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t := r.start(ctx, c)
	if err := r.Await(ctx, t, names); err != nil {
		return err
	}
	// Awaited and not abandoned: nobody holds t any more.
	*t = Trip{done: t.done}
	trips.Put(t)
	return Ended(ctx)
}

// trips recycles the trips of Do, with their done channels (empty once
// Awaited).
var trips = sync.Pool{New: func() any { return &Trip{done: make(chan struct{}, 1)} }}

// Start runs fn on an I/O goroutine; Await waits for it, once. Several trips
// started together run in parallel (the masters of a Redis Cluster). The
// caller waits for the abandoned trips on their names first (Wait).
func (r *Runner) Start(ctx context.Context, fn func(ctx context.Context)) *Trip {
	return r.start(ctx, funcCall(fn))
}

func (r *Runner) start(ctx context.Context, c Call) *Trip {
	t := trips.Get().(*Trip)
	t.r, t.ctx, t.call = r, ctx, c
	r.io.run(t)
	return t
}

// run runs t's call, on an I/O goroutine.
func (t *Trip) run() {
	defer t.r.abandoned.finish(t)
	defer func() { t.panicked = recover() }()
	c, ctx := t.call, t.ctx
	t.call, t.ctx = nil, nil // an abandoned trip must not keep its call's memory once done
	c.Run(ctx)
}

// Await waits until t has finished, and returns nil, or until ctx ends, and
// returns its error, recording t as abandoned on names. A trip that has
// finished counts as finished, even once ctx has ended. A panic of t's fn is
// raised again here, on the caller's goroutine.
func (r *Runner) Await(ctx context.Context, t *Trip, names []string) error {
	select {
	case <-t.done:
	default:
		select {
		case <-t.done:
		case <-ctx.Done():
			if r.abandoned.add(t, names) {
				return ctx.Err()
			}
			<-t.done // it finished first: its value is on the way
		}
	}
	if t.panicked != nil {
		panic(t.panicked)
	}
	return nil
}

// Wait waits until no abandoned trip on names is running, or ctx ends.
func (r *Runner) Wait(ctx context.Context, names []string) error {
	return r.abandoned.wait(ctx, names)
}

// Abandoned reports how many names have abandoned trips still running.
func (r *Runner) Abandoned() int { return int(r.abandoned.n.Load()) }

// Ended returns ctx's error, or context.DeadlineExceeded once its deadline
// has passed, or nil.
func Ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// pool is a Runner's I/O goroutines: as many as calls in flight need, each
// ending after idle without work, or when closing is closed.
type pool struct {
	work    chan *Trip
	closing <-chan struct{}
}

// run hands t to an idle I/O goroutine, or to a new one when none is idle.
func (p *pool) run(t *Trip) {
	select {
	case p.work <- t:
	default:
		go p.serve(t)
	}
}

// serve runs trips until it has had none for a whole idle period. Its timer
// is armed once per period rather than once per trip: re-arming it after
// each round trip was a timer operation on every call.
func (p *pool) serve(t *Trip) {
	tick := time.NewTicker(idle)
	defer tick.Stop()
	for {
		t.run()
		worked := true
		for wait := true; wait; {
			select {
			case t = <-p.work:
				wait = false
			case <-tick.C:
				if !worked {
					return
				}
				worked = false
			case <-p.closing:
				return
			}
		}
	}
}
