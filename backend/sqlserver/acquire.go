package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// errNoResult means a batch ended without its result row: a fault, never "not
// acquired".
var errNoResult = errors.New("sqlserver: the batch returned no result row")

// acquireResult is the row the acquire batch selects.
type acquireResult struct {
	outcome    int64
	holder     string
	token      int64
	expiresAt  time.Time
	rowVersion []byte
	remaining  time.Duration // busy and turn: the holder's or the turn's time left, on the server's clock
	queued     bool          // not acquired: the attempt has a queue entry after the batch
	heldLimit  int           // outcomeLimit: the limit of the name's live holdings
}

// Acquire grants r.Key to the attempt r.Attempt of r.Owner when no live row
// exists, takes over an expired row (both with a new token), refreshes the
// live row of this same attempt (same token), or reports the live holding
// that stands in the way (any other attempt, the same owner's included):
// its owner, token, expiry and remaining time as the server measured it.
// It keeps the name's waiter queue in the same transaction (backend/queue.go,
// acquireTemplate): a free name whose queue head is another attempt is
// refused during that head's turn, with Holder "" and the turn's time left,
// and a refused request with Wait and Queue.EntryTTL queues the attempt
// (Grant.Queued). With a replica configured, a grant is reported only once
// the replica shows it; otherwise it is released and reported as not
// acquired (or as an error when that release failed too). A request with
// Limit above 1 runs the shared acquire batch (shared.go) instead, in one
// round trip too.
func (b *Backend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	var res acquireResult
	err := b.retry(ctx, "acquire", []string{r.Key}, func(ctx context.Context) error {
		var err error
		res, err = b.acquireOnce(ctx, r)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "acquire failed", err, "key", r.Key, "owner", r.Owner, "attempt", r.Attempt)
		return backend.Grant{}, fmt.Errorf("sqlserver: acquire %q: %w", r.Key, err)
	}
	if res.outcome == outcomeBusy || res.outcome == outcomeTurn || res.outcome == outcomeLimit {
		return backend.Grant{
			Holder:          res.holder,
			HolderToken:     uint64(res.token),
			HolderExpiresAt: res.expiresAt,
			HolderExpiresIn: res.remaining,
			Queued:          res.queued,
			HeldLimit:       res.heldLimit,
		}, nil
	}
	grant := backend.Grant{Acquired: true, Token: uint64(res.token), ExpiresAt: res.expiresAt}
	if b.replica == nil {
		return grant, nil
	}
	return b.confirmGrant(ctx, r, grant, res.rowVersion)
}

// acquireOnce runs the acquire batch. A duplicate key from its INSERT means
// another session created the name's row between this batch's read and its
// insert: someone else won, which is never a fault. The batch (aborted
// whole, under XACT_ABORT) is run again to read who did, at most
// duplicateRereads times; a name that keeps being created and removed under
// it meanwhile is answered as refused, with no holder to name.
//
// On Microsoft SQL Server the read's UPDLOCK, HOLDLOCK takes a key-range
// lock that keeps the race out; engines that ignore those hints (Babelfish
// for PostgreSQL) meet it whenever two sessions acquire a free name at once.
func (b *Backend) acquireOnce(ctx context.Context, r backend.AcquireRequest) (acquireResult, error) {
	for range duplicateRereads {
		res, err := b.acquireBatch(ctx, r)
		if !hasErrorNumber(err, duplicateKeyErrors...) {
			return res, err
		}
		b.log.DebugContext(ctx, "acquire met a concurrent insert; reading again", "key", r.Key, "err", err)
	}
	return acquireResult{outcome: outcomeTurn}, nil
}

// duplicateRereads bounds how often acquireOnce runs the batch again after
// a duplicate key.
const duplicateRereads = 3

// duplicateKeyErrors are the numbers of a PRIMARY KEY or UNIQUE constraint
// violation (2627) and of a duplicate key in a unique index (2601).
var duplicateKeyErrors = []int32{2627, 2601}

func (b *Backend) acquireBatch(ctx context.Context, r backend.AcquireRequest) (acquireResult, error) {
	batch, args := b.q.acquire, b.acquireArgs(r)
	if r.Limit > 1 {
		batch, args = b.q.acquireShared, append(args, sql.Named("limit", int64(r.Limit)))
	}
	rows, err := b.db.QueryContext(ctx, batch, args...)
	if err != nil {
		return acquireResult{}, durabilityError(err)
	}
	res, err := scanAcquire(rows, r.Owner, max(r.Limit, 1))
	return res, durabilityError(err)
}

// durabilityError marks the error the durability guard raises, so that
// callers can tell it with errors.Is(err, ErrDelayedDurability).
func durabilityError(err error) error {
	if hasErrorNumber(err, errDelayedDurabilityNumber) {
		return fmt.Errorf("%w: %w", ErrDelayedDurability, err)
	}
	return err
}

// acquireArgs are the parameters of the acquire batch. go-mssqldb sends a Go
// string as NVARCHAR (so any Unicode text survives) and an int64 as BIGINT.
// @entryTtlUs 0 queues nothing: a request without Wait or without a
// QueueRequest (Validate refuses a QueueRequest without Wait).
func (b *Backend) acquireArgs(r backend.AcquireRequest) []any {
	var entryTTL, pickup int64
	if r.Wait && r.Queue.EntryTTL > 0 {
		entryTTL, pickup = ttlMicros(r.Queue.EntryTTL), ttlMicros(r.Queue.Pickup)
	}
	return []any{
		sql.Named("name", r.Key),
		sql.Named("owner", r.Owner),
		sql.Named("attempt", r.Attempt),
		sql.Named("ttlUs", ttlMicros(r.TTL)),
		sql.Named("metadata", r.Metadata),
		sql.Named("entryTtlUs", entryTTL),
		sql.Named("pickupUs", pickup),
		sql.Named("poll", pollParam(r.Queue.Poll)),
		sql.Named("sweep", b.sweepRows()),
	}
}

// sweepRows is how many expired rows this acquire's batch may delete: the
// sweep batch when a sweep is due (WithSweep), else 0, which makes the
// batch's DELETE TOP (@sweep) delete nothing.
func (b *Backend) sweepRows() int64 {
	every, batch := b.cfg.sweepEvery, int64(b.cfg.sweepBatch)
	if batch == 0 || every == 0 {
		return batch
	}
	now := time.Now().UnixNano()
	last := b.lastSweep.Load()
	if now-last < int64(every) || !b.lastSweep.CompareAndSwap(last, now) {
		return 0
	}
	return batch
}

// scanAcquire reads the one result row and checks that it makes sense, so
// that a malformed answer is reported as a fault rather than as a grant.
// limit is the request's (1: exclusive).
func scanAcquire(rows *sql.Rows, owner string, limit int) (acquireResult, error) {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return acquireResult{}, err
		}
		return acquireResult{}, errNoResult
	}
	var (
		res     acquireResult
		holder  sql.NullString
		token   sql.NullInt64
		expires sql.NullTime
		remUs   sql.NullInt64
		held    sql.NullInt64
	)
	if err := rows.Scan(&res.outcome, &holder, &token, &expires, &res.rowVersion, &remUs, &res.queued, &held); err != nil {
		return acquireResult{}, fmt.Errorf("sqlserver: scanning the acquire result: %w", err)
	}
	// Drain the result so that an error raised after the row (the batch
	// aborted under XACT_ABORT) is not missed.
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return acquireResult{}, err
	}
	if err := rows.Close(); err != nil {
		return acquireResult{}, err
	}
	res.holder, res.token, res.expiresAt = holder.String, token.Int64, expires.Time.UTC()
	switch res.outcome {
	case outcomeInserted, outcomeTakeover, outcomeRefresh:
		// A granted attempt's entry is removed in the same batch.
		if res.holder != owner || token.Int64 <= 0 || !expires.Valid || len(res.rowVersion) != 8 || res.queued {
			return acquireResult{}, fmt.Errorf("sqlserver: malformed grant (outcome %d, holder %q, token %d, expiry valid %t, rowversion %d bytes, queued %t)",
				res.outcome, res.holder, token.Int64, expires.Valid, len(res.rowVersion), res.queued)
		}
	case outcomeLimit:
		// Live holdings of another limit: one of them is named, as busy.
		if !holder.Valid || token.Int64 <= 0 || !expires.Valid || !remUs.Valid || remUs.Int64 <= 0 ||
			!held.Valid || held.Int64 < 1 || held.Int64 > backend.MaxLimit || int(held.Int64) == limit {
			return acquireResult{}, fmt.Errorf("sqlserver: malformed limit answer (holder valid %t, token %d, expiry valid %t, remaining valid %t, %d µs, held limit %d for limit %d)",
				holder.Valid, token.Int64, expires.Valid, remUs.Valid, remUs.Int64, held.Int64, limit)
		}
		res.heldLimit = int(held.Int64)
		res.remaining = time.Duration(min(remUs.Int64, int64(backend.MaxTTL/time.Microsecond))) * time.Microsecond
	case outcomeBusy:
		// The row is live (its expiry is after the clock read), so its
		// remaining time is positive and its token was issued.
		if !holder.Valid || token.Int64 <= 0 || !expires.Valid || !remUs.Valid || remUs.Int64 <= 0 {
			return acquireResult{}, fmt.Errorf("sqlserver: malformed busy answer (holder valid %t, token %d, expiry valid %t, remaining valid %t, %d µs)",
				holder.Valid, token.Int64, expires.Valid, remUs.Valid, remUs.Int64)
		}
		res.remaining = time.Duration(min(remUs.Int64, int64(backend.MaxTTL/time.Microsecond))) * time.Microsecond
	case outcomeTurn:
		// No holding: the queue's head has the turn, which ends at
		// ExpiresAtUtc, after the time left (positive: it ended otherwise).
		if holder.Valid || token.Valid || !expires.Valid || !remUs.Valid || remUs.Int64 <= 0 {
			return acquireResult{}, fmt.Errorf("sqlserver: malformed turn answer (holder valid %t, token valid %t, expiry valid %t, remaining valid %t, %d µs)",
				holder.Valid, token.Valid, expires.Valid, remUs.Valid, remUs.Int64)
		}
		res.remaining = time.Duration(min(remUs.Int64, int64(backend.MaxTTL/time.Microsecond))) * time.Microsecond
	default:
		return acquireResult{}, fmt.Errorf("sqlserver: unknown acquire outcome %d", res.outcome)
	}
	return res, nil
}
