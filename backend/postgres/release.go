package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

// Release deletes the holding (r.Key, r.Owner, r.Attempt, r.Token), or with
// Token 0 the holding r.Attempt made whatever its token, and commits
// synchronously. When that holding was live and the key's waiter queue has
// a live entry, the head entry is handed the key in the same transaction (a
// new holding with a new token, expiring after the entry's pickup window)
// and its waiter is notified (see WatchHandOffs); otherwise a release that a
// waiter marked is announced on Channel so that waiters wake at once. The
// entry of (r.Owner, r.Attempt), if any, is removed (a waiter leaving the
// queue). Nothing matching is not an error, and whatever else holds the key
// is left alone. Faults are retried and returned wrapped; a retry after an
// ambiguous failure is harmless.
//
// Release takes the name's advisory lock first, like Acquire. An acquire
// whose caller gave up (context ended) may still be queued on that lock in
// the server and commit later; queued before this release, it is granted the
// lock first, so the release that cleans up after it (Token 0) runs after it
// and deletes its row instead of leaving an unowned lease behind.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Token > math.MaxInt64 {
		return nil // no holding can have this token
	}
	err := b.retry(ctx, "release", func(ctx context.Context) error {
		batch := &pgx.Batch{}
		b.queueRelease(batch, r, b.q.lock)
		res := b.pool.SendBatch(ctx, batch)
		err := readRelease(res)
		if cerr := res.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: release %q: %w", r.Key, err)
	}
	return nil
}

// queueRelease queues the release transaction: BEGIN, the name's advisory
// lock (lock: b.q.lock with synchronous commit, or, for Batch,
// b.q.lockDeferred), the delete (which hands the key on, or announces a
// marked holding), COMMIT. Release and Batch both send it; readRelease reads
// it.
func (b *Backend) queueRelease(batch *pgx.Batch, r backend.ReleaseRequest, lock string) {
	batch.Queue("BEGIN")
	batch.Queue(lock, b.lockKey(r.Key))
	batch.Queue(b.q.release, r.Key, r.Owner, r.Attempt, int64(r.Token), b.channel, b.q.seq)
	batch.Queue("COMMIT")
}

// readRelease reads the results of the transaction queueRelease queued; nil
// once its COMMIT succeeded.
func readRelease(res pgx.BatchResults) error {
	for range 4 {
		if _, err := res.Exec(); err != nil {
			return err
		}
	}
	return nil
}
