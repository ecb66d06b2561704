package main

import (
	"context"
	"sync"

	"github.com/leasehold/leasehold/backend"
)

// counter counts, in a backend.Wrap middleware under a leasehold Manager,
// round trips and how waiters were woken: an acquire of an attempt whose
// last answer was "busy" is a wake-up, by notification when a release of its
// key was announced since, by poll (the engine's own timer) otherwise. The
// state is per attempt: under a limit above 1 each holding's actor makes
// acquires of the same key of its own, and another's refusal is no wake-up.
// backend.Wrap keeps every capability of the backend (notices, batches,
// hand-offs): a wrapper that hid one would change what is measured.
type counter struct {
	st *lockStats

	mu   sync.Mutex
	busy map[string]map[string]bool // key -> attempt -> a release was announced since its busy answer
}

// wrapCounting wraps b with the counting middleware.
func wrapCounting(b backend.Backend, st *lockStats) backend.Backend {
	c := &counter{st: st, busy: map[string]map[string]bool{}}
	return backend.Wrap(b, backend.Middleware{Call: c.call, Notify: c.notify, NonBlocking: true})
}

// call counts one round trip (a batch is one) and the wake-ups it carries.
func (c *counter) call(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
	c.st.roundTrips.Add(1)
	c.mu.Lock()
	for i := range calls {
		switch calls[i].Op {
		case backend.OpAcquire:
			if notified, wasBusy := c.busy[calls[i].Acquire.Key][calls[i].Acquire.Attempt]; wasBusy {
				if notified {
					c.st.notifyWakes.Add(1)
				} else {
					c.st.pollWakes.Add(1)
				}
			}
		case backend.OpRenew:
			c.st.renewals.Add(1)
		}
	}
	c.mu.Unlock()
	next(ctx, calls)
	c.mu.Lock()
	for i := range calls {
		var key, attempt string
		switch calls[i].Op {
		case backend.OpAcquire:
			key, attempt = calls[i].Acquire.Key, calls[i].Acquire.Attempt
		case backend.OpRelease: // the attempt is over (one handed a slot by notice acquires no more)
			key, attempt = calls[i].Release.Key, calls[i].Release.Attempt
		default:
			continue
		}
		if calls[i].Op == backend.OpAcquire && calls[i].Err == nil && !calls[i].Grant.Acquired {
			if c.busy[key] == nil {
				c.busy[key] = map[string]bool{}
			}
			c.busy[key][attempt] = false
		} else if m := c.busy[key]; m != nil {
			delete(m, attempt)
			if len(m) == 0 {
				delete(c.busy, key)
			}
		}
	}
	c.mu.Unlock()
}

// notify records an announced release of key.
func (c *counter) notify(key string, next func(string)) {
	c.st.notifications.Add(1)
	c.mu.Lock()
	for attempt := range c.busy[key] {
		c.busy[key][attempt] = true
	}
	c.mu.Unlock()
	next(key)
}

// renewCounting counts round trips and renewals with nothing else in the
// way: the scale mode measures the engine's own cost per renewal, and a
// backend.Wrap middleware copies every renewal of a batch into a Call and
// back (three copies of a few hundred bytes each), which on the memory store
// cost more than the store itself. Every method and Info are the store's.
type renewCounting struct {
	backend.Backend
	st *lockStats
}

func (c renewCounting) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	c.st.roundTrips.Add(1)
	return c.Backend.Acquire(ctx, r)
}

func (c renewCounting) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	c.st.roundTrips.Add(1)
	c.st.renewals.Add(1)
	return c.Backend.Renew(ctx, r)
}

func (c renewCounting) Release(ctx context.Context, r backend.ReleaseRequest) error {
	c.st.roundTrips.Add(1)
	return c.Backend.Release(ctx, r)
}

func (c renewCounting) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	c.st.roundTrips.Add(1)
	c.st.renewals.Add(uint64(len(rs)))
	return c.Backend.RenewBatch(ctx, rs)
}

func (c renewCounting) Batch(ctx context.Context, calls []backend.Call) {
	c.st.roundTrips.Add(1)
	for i := range calls {
		if calls[i].Op == backend.OpRenew {
			c.st.renewals.Add(1)
		}
	}
	c.Backend.Batch(ctx, calls)
}
