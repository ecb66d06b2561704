package postgres

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// callSlots bounds the store calls that a Backend has in flight to what its
// pool can serve at once (its MaxConns, at least 1): a call beyond it waits
// here, in arrival order and with its caller's context, rather than in the
// pool or on the server.
func newCallSlots(maxConns int32) *semaphore.Weighted {
	return semaphore.NewWeighted(int64(max(1, maxConns)))
}

// inSlot runs fn, one store call, once a call slot is free; it answers the
// context's error if ctx ends first, and says what to do when the lease
// tables are missing.
func (b *Backend) inSlot(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := b.slots.Acquire(ctx, 1); err != nil {
		return err
	}
	defer b.slots.Release(1)
	return schemaMissing(fn(ctx))
}
