package main

import (
	"context"
	"sync"

	"github.com/leasehold/leasehold/backend"
)

// countingBackend wraps the backend under a leasehold Manager to count round
// trips and to tell how waiters were woken: an acquire of a key whose last
// answer was "busy" is a wake-up, by notification when a release of that key
// was announced since, by poll (the engine's own timer) otherwise. The engine
// serialises acquires of one key per Manager, so one state per key suffices.
type countingBackend struct {
	backend.Backend
	st *lockStats

	mu   sync.Mutex
	busy map[string]bool // key -> a release was announced since the busy answer
}

// wrapCounting wraps b, keeping the optional capabilities the engine looks
// for (a wrapper that hid them would change what is measured).
func wrapCounting(b backend.Backend, st *lockStats) backend.Backend {
	c := &countingBackend{Backend: b, st: st, busy: map[string]bool{}}
	_, imm := b.(backend.Immediate)
	_, watch := b.(backend.ReleaseWatcher)
	_, batch := b.(backend.BatchRenewer)
	switch {
	case imm:
		return countingImmediate{c}
	case watch && batch:
		return countingWatchBatch{countingBatch{c}}
	case batch:
		return countingBatch{c}
	default:
		return c
	}
}

func (c *countingBackend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	c.st.roundTrips.Add(1)
	c.mu.Lock()
	if notified, wasBusy := c.busy[r.Key]; wasBusy {
		if notified {
			c.st.notifyWakes.Add(1)
		} else {
			c.st.pollWakes.Add(1)
		}
	}
	c.mu.Unlock()
	g, err := c.Backend.Acquire(ctx, r)
	c.mu.Lock()
	if err == nil && !g.Acquired {
		c.busy[r.Key] = false
	} else {
		delete(c.busy, r.Key)
	}
	c.mu.Unlock()
	return g, err
}

func (c *countingBackend) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	c.st.roundTrips.Add(1)
	c.st.renewals.Add(1)
	return c.Backend.Renew(ctx, r)
}

func (c *countingBackend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	c.st.roundTrips.Add(1)
	return c.Backend.Release(ctx, r)
}

// notified records an announced release of key.
func (c *countingBackend) notified(key string) {
	c.st.notifications.Add(1)
	c.mu.Lock()
	if _, ok := c.busy[key]; ok {
		c.busy[key] = true
	}
	c.mu.Unlock()
}

// countingImmediate keeps backend.Immediate (the memory backend).
type countingImmediate struct{ *countingBackend }

func (countingImmediate) Immediate() {}

// countingBatch keeps backend.BatchRenewer; one batch is one round trip.
type countingBatch struct{ *countingBackend }

func (c countingBatch) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	c.st.roundTrips.Add(1)
	c.st.renewals.Add(uint64(len(rs)))
	return c.Backend.(backend.BatchRenewer).RenewBatch(ctx, rs)
}

// countingWatchBatch keeps backend.ReleaseWatcher and BatchRenewer.
type countingWatchBatch struct{ countingBatch }

func (c countingWatchBatch) WatchReleases(ctx context.Context, fn func(key string)) error {
	return c.Backend.(backend.ReleaseWatcher).WatchReleases(ctx, func(key string) {
		c.notified(key)
		fn(key)
	})
}
