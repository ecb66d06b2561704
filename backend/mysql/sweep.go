package mysql

import (
	"context"
	"time"
)

// maybeSweep clears up to cfg.sweepBatch abandoned names (WithSweep): it
// reads which names have expired rows, then runs on each the sweep procedure (procs.go), which drops
// what expired under the name's lock, as every call on a name runs, so that it takes
// the name's lock and keeps its rules (a renewal that came in between wins,
// a live holding or entry stays, the lock row goes when nothing is left).
// Deleting holdings never lowers the tokens to come: the holds table's
// AUTO_INCREMENT counter is durable on the servers checkServer accepts. It
// is best effort: a failure is logged and ignored (the acquire that follows
// reports real faults).
func (b *Backend) maybeSweep(ctx context.Context) {
	if b.cfg.sweepBatch == 0 {
		return
	}
	now := time.Now().UnixNano()
	if now-b.lastSweep.Load() < int64(b.cfg.sweepEvery) || !b.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer b.sweeping.Store(false)
	b.lastSweep.Store(now)
	names, err := b.abandonedNames(ctx)
	if err != nil {
		b.log.DebugContext(ctx, "sweep: reading abandoned names failed", "err", err)
		return
	}
	for _, name := range names {
		err := b.retry(ctx, "sweep", []string{name}, func(ctx context.Context) error {
			_, err := b.db.ExecContext(ctx, b.q.sweep, name)
			return err
		})
		if err != nil {
			b.log.DebugContext(ctx, "sweep: clearing a name failed", "key", name, "err", err)
			return
		}
	}
	if len(names) > 0 {
		b.log.DebugContext(ctx, "sweep: cleared expired rows", "names", len(names))
	}
}

// abandonedNames reads up to cfg.sweepBatch names with expired rows.
func (b *Backend) abandonedNames(ctx context.Context) ([]string, error) {
	var names []string
	err := b.call(ctx, nil, func(ctx context.Context) error {
		rows, err := b.db.QueryContext(ctx, b.q.abandoned, b.cfg.sweepBatch, b.cfg.sweepBatch)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() && len(names) < b.cfg.sweepBatch {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			names = append(names, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err // fn may still be running: names is not ours to read
	}
	return names, nil
}
