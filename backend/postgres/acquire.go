package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

// Acquire grants r.Key to the attempt r.Attempt (of r.Owner) when it is free
// or expired, with a new token; when the live row is this attempt's own (a
// retry), it is refreshed and keeps its token. Any other live holding, one of
// the same owner included, makes the Grant report that holding (owner, token,
// expiry and the time it has left, measured by the server) with a nil error.
// The request is validated first (errors wrap backend.ErrInvalidRequest;
// nothing is sent then). Faults are retried as a whole transaction (see
// WithRetry): a retry is the same attempt, so a grant whose answer was lost
// is found again, not refused. Errors are returned wrapped. The grant is
// committed synchronously whatever the server's synchronous_commit.
//
// The waiter queue (backend/queue.go) is kept by the same statement: a
// refused waiting attempt with r.Queue.EntryTTL > 0 is queued (Grant.Queued),
// a free name whose live head is another attempt is refused during that
// head's turn (Holder "" and the turn's time left), and a grant removes the
// attempt's own entry. It costs the uncontended acquire no round trip.
func (b *Backend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	b.maybeSweep(ctx)
	var g backend.Grant
	err := b.retry(ctx, "acquire", func(ctx context.Context) error {
		var err error
		g, err = b.acquireOnce(ctx, r)
		return err
	})
	if err != nil {
		return backend.Grant{}, fmt.Errorf("postgres: acquire %q: %w", r.Key, err)
	}
	return g, nil
}

// acquireOnce sends the whole transaction in one round trip (a pipeline),
// of either limit: the name's lock is held only while the server runs it.
func (b *Backend) acquireOnce(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	batch := &pgx.Batch{}
	b.queueAnyAcquire(batch, r, b.q.lock)
	res := b.pool.SendBatch(ctx, batch)
	g, err := readAcquire(res)
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return backend.Grant{}, err
	}
	return g, nil
}

// queueAcquire queues the acquire transaction: BEGIN, the per-name advisory
// lock (lock: b.q.lock, which also sets synchronous commit for this
// transaction, or, for Batch, b.q.lockDeferred), the acquire statement
// (the upsert, which marks the holding in the way when r.Wait, with the
// waiter queue's part), COMMIT. Acquire and Batch both send it; readAcquire
// reads its answer.
func (b *Backend) queueAcquire(batch *pgx.Batch, r backend.AcquireRequest, lock string) {
	q := r.Queue // valid: only with Wait (r.Validate)
	channel := ""
	if q.Notify != "" {
		channel = b.handOffChannel(q.Notify)
	}
	batch.Queue("BEGIN")
	batch.Queue(lock, b.lockKey(r.Key))
	batch.Queue(b.q.acquire, r.Key, r.Owner, r.Attempt, r.TTL.Microseconds(), r.Metadata, b.q.seq, r.Wait,
		q.EntryTTL.Microseconds(), q.Pickup.Microseconds(), q.Notify, channel, int64(q.Poll)) // Poll: its 64 bits as a bigint
	batch.Queue("COMMIT")
}

// readAcquire reads the results of the transaction queueAcquire queued. An
// error means the transaction may not have committed (the grant exists only
// once COMMIT succeeded).
func readAcquire(res pgx.BatchResults) (backend.Grant, error) {
	var (
		g         backend.Grant
		found     bool
		token     int64
		expires   time.Time
		holder    string
		remaining int64 // microseconds the holder (or the head's turn) has left, by the server's clock
		queued    bool
		heldLimit int32
	)
	_, err := res.Exec()
	if err == nil {
		_, err = res.Exec()
	}
	if err == nil {
		err = res.QueryRow().Scan(&g.Acquired, &token, &expires, &holder, &remaining, &queued, &heldLimit)
		found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if err == nil {
		_, err = res.Exec() // COMMIT: the grant exists only once this succeeds
	}
	if err != nil {
		return backend.Grant{}, err
	}
	switch {
	case !found:
		// The row vanished between the upsert's conflict and the report
		// (only possible when something other than this package writes the
		// table): not acquired, holder unknown.
	case g.Acquired:
		g.Token, g.ExpiresAt = uint64(token), expires
	default:
		// A head's turn reports no holder (token 0) and the turn's end.
		g.Holder, g.HolderToken, g.HolderExpiresAt = holder, uint64(token), expires
		g.HolderExpiresIn = time.Duration(remaining) * time.Microsecond
		g.Queued = queued
		g.HeldLimit = int(heldLimit)
	}
	return g, nil
}
