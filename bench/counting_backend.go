package main

import (
	"context"
	"sync"

	"github.com/leasehold/leasehold/backend"
)

// counter counts, in a backend.Wrap middleware under a leasehold Manager,
// round trips and how waiters were woken: an acquire of a key whose last
// answer was "busy" is a wake-up, by notification when a release of that key
// was announced since, by poll (the engine's own timer) otherwise. The engine
// serialises acquires of one key per Manager, so one state per key suffices.
// backend.Wrap keeps every capability of the backend (notices, batches,
// hand-offs): a wrapper that hid one would change what is measured.
type counter struct {
	st *lockStats

	mu   sync.Mutex
	busy map[string]bool // key -> a release was announced since the busy answer
}

// wrapCounting wraps b with the counting middleware.
func wrapCounting(b backend.Backend, st *lockStats) backend.Backend {
	c := &counter{st: st, busy: map[string]bool{}}
	return backend.Wrap(b, backend.Middleware{Call: c.call, Notify: c.notify, NonBlocking: true})
}

// call counts one round trip (a batch is one) and the wake-ups it carries.
func (c *counter) call(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
	c.st.roundTrips.Add(1)
	c.mu.Lock()
	for i := range calls {
		switch calls[i].Op {
		case backend.OpAcquire:
			if notified, wasBusy := c.busy[calls[i].Acquire.Key]; wasBusy {
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
		if calls[i].Op != backend.OpAcquire {
			continue
		}
		if calls[i].Err == nil && !calls[i].Grant.Acquired {
			c.busy[calls[i].Acquire.Key] = false
		} else {
			delete(c.busy, calls[i].Acquire.Key)
		}
	}
	c.mu.Unlock()
}

// notify records an announced release of key.
func (c *counter) notify(key string, next func(string)) {
	c.st.notifications.Add(1)
	c.mu.Lock()
	if _, ok := c.busy[key]; ok {
		c.busy[key] = true
	}
	c.mu.Unlock()
	next(key)
}
