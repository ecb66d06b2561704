package postgres

import (
	"context"
	"time"
)

// maybeSweep deletes a batch of expired rows and a batch of expired waiter
// queue entries (one statement), at most once per sweep interval and by one
// caller at a time. It runs as its own statement before the
// acquire transaction, never inside it, so it holds no row lock while waiting
// for an advisory lock. It is best effort: a failure is logged and ignored
// (the acquire that follows reports real faults).
func (b *Backend) maybeSweep(ctx context.Context) {
	if b.sweepBatch == 0 {
		return
	}
	now := time.Now().UnixNano()
	if now-b.lastSweep.Load() < int64(b.sweepEvery) || !b.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer b.sweeping.Store(false)
	b.lastSweep.Store(now)
	var rows, entries int64
	err := b.inSlot(ctx, func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, b.q.sweep, b.sweepBatch).Scan(&rows, &entries)
	})
	if err != nil {
		b.log.DebugContext(ctx, "leasehold postgres: sweep of expired rows failed", "err", err)
		return
	}
	if rows > 0 || entries > 0 {
		b.log.DebugContext(ctx, "leasehold postgres: swept expired rows", "rows", rows, "queue_entries", entries)
	}
}
