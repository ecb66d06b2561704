package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

// Acquire grants r.Key to r.Owner when it is free, expired or already held
// by r.Owner (then the row is refreshed and keeps its token). When another
// owner holds it, the Grant reports that holder and its expiry with a nil
// error. The request is validated first (errors wrap
// backend.ErrInvalidRequest; nothing is sent then). Faults are retried as a
// whole transaction (see WithRetry) and returned wrapped.
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

// acquireOnce sends the whole transaction in one round trip (a pipeline):
// BEGIN, the per-name advisory lock, the upsert, COMMIT.
func (b *Backend) acquireOnce(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	batch.Queue(b.q.lock, b.lockKey(r.Key))
	batch.Queue(b.q.acquire, r.Key, r.Owner, r.TTL.Microseconds(), r.Metadata, b.q.seq)
	batch.Queue("COMMIT")
	res := b.pool.SendBatch(ctx, batch)

	var (
		g       backend.Grant
		found   bool
		token   int64
		expires time.Time
		holder  string
	)
	_, err := res.Exec()
	if err == nil {
		_, err = res.Exec()
	}
	if err == nil {
		err = res.QueryRow().Scan(&g.Acquired, &token, &expires, &holder)
		found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if err == nil {
		_, err = res.Exec() // COMMIT: the grant exists only once this succeeds
	}
	if cerr := res.Close(); err == nil {
		err = cerr
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
		g.Holder, g.HolderExpiresAt = holder, expires
	}
	return g, nil
}
