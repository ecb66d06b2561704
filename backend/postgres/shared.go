package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

// Names with several holders (backend/limit.go). A name acquired with Limit
// n > 1 keeps its holdings in the holds table, one row per (name, attempt),
// and one row of the lease table, its record: attempt '' (which no request
// can name), holder_limit n, fencing_token the latest token of the name,
// expires_at never before the end of a live holding of the name (the end
// of the last, once the name's lock was taken; a renewal, which takes no
// lock, only extends it). The exclusive rows are untouched: an exclusive
// acquire, release or renewal sends as many statements, in as many round
// trips, as before; they read the record as a live holding of another limit,
// and the renewal and release call the shared functions (queries.go) only
// for a name that has a record. A version of this
// package without the holds table reads the record as a live holding too
// and refuses the name; the keep trigger makes its revoke fail.

// recordOwner is the owner of a name's record, as versions that do not
// know the record show it.
const recordOwner = "leasehold: several holders"

// sharedQueries are the statements of the acquire of a name with several
// holders, run one after another in one transaction after the name's lock.
// $2 is the transaction's clock reading.
type sharedQueries struct {
	lockRecord, begin, record, drop, live, refresh, extend, mark, dropEntries, entries string
	startTurns, lapse, grant, upsertRecord, leave, clearTurns, enqueue, queued         string
	heads, handed                                                                      string
}

func buildShared(n names) sharedQueries {
	return sharedQueries{
		// Locks the name's row (the record, if it is one) and then its
		// holdings, in the order a renewal takes them, so that no renewal
		// extends one that this transaction finds expired; then reads the
		// clock.
		lockRecord: fmt.Sprintf(`SELECT 1 FROM %[1]s WHERE lease_name = $1 FOR UPDATE`, n.table),
		begin: fmt.Sprintf(`SELECT clock_timestamp() FROM (SELECT count(*) FROM
    (SELECT 1 FROM %[1]s WHERE lease_name = $1 FOR UPDATE) x) y`, n.holds),
		record: fmt.Sprintf(`SELECT attempt = '' AND holder_limit > 1, holder_limit, owner_instance_id, fencing_token, expires_at,
    GREATEST(0, extract(epoch FROM expires_at - $2::timestamptz) * 1000000)::bigint, waited
FROM %[1]s WHERE lease_name = $1 AND expires_at > $2::timestamptz FOR UPDATE`, n.table),
		drop: fmt.Sprintf(`DELETE FROM %[1]s WHERE lease_name = $1 AND (expires_at <= $2::timestamptz OR NOT $3::boolean)`, n.holds),
		live: fmt.Sprintf(`SELECT attempt, owner_instance_id, fencing_token, expires_at,
    GREATEST(0, extract(epoch FROM expires_at - $2::timestamptz) * 1000000)::bigint
FROM %[1]s WHERE lease_name = $1 AND expires_at > $2::timestamptz ORDER BY expires_at, fencing_token`, n.holds),
		refresh: fmt.Sprintf(`UPDATE %[1]s SET renewed_at = $2::timestamptz, expires_at = $2::timestamptz + $4::bigint * interval '1 microsecond', metadata = $5
WHERE lease_name = $1 AND attempt = $3 RETURNING expires_at`, n.holds),
		extend: fmt.Sprintf(`UPDATE %[1]s SET expires_at = GREATEST(expires_at, $2::timestamptz)
WHERE lease_name = $1 AND attempt = '' AND holder_limit > 1`, n.table),
		mark:        fmt.Sprintf(`UPDATE %[1]s SET waited = true WHERE lease_name = $1 AND attempt = '' AND holder_limit > 1 AND NOT waited`, n.table),
		dropEntries: fmt.Sprintf(`DELETE FROM %[1]s WHERE lease_name = $1 AND expires_at <= $2::timestamptz`, n.queue),
		entries: fmt.Sprintf(`SELECT attempt, owner_instance_id, pickup_us, turn_started_at FROM %[1]s
WHERE lease_name = $1 ORDER BY place`, n.queue),
		startTurns: fmt.Sprintf(`UPDATE %[1]s SET turn_started_at = $2::timestamptz
WHERE lease_name = $1 AND attempt = ANY($3::text[]) AND turn_started_at IS NULL`, n.queue),
		lapse: fmt.Sprintf(`DELETE FROM %[1]s WHERE lease_name = $1 AND attempt = ANY($2::text[])`, n.queue),
		grant: fmt.Sprintf(`INSERT INTO %[1]s AS h (lease_name, attempt, owner_instance_id, fencing_token, acquired_at, renewed_at, expires_at, metadata)
VALUES ($1, $3, $4, nextval($6::regclass), $2::timestamptz, $2::timestamptz, $2::timestamptz + $5::bigint * interval '1 microsecond', $7)
ON CONFLICT (lease_name, attempt) DO UPDATE SET
    owner_instance_id = excluded.owner_instance_id, fencing_token = excluded.fencing_token,
    acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, expires_at = excluded.expires_at, metadata = excluded.metadata
RETURNING h.fencing_token, h.expires_at`, n.holds),
		// The record: a live one of this limit is moved on (latest token,
		// the latest expiry); anything else (an expired row, exclusive or
		// not) is replaced. A live row of another kind makes no row: the
		// transaction is then rolled back.
		upsertRecord: fmt.Sprintf(`INSERT INTO %[1]s AS m (lease_name, owner_instance_id, attempt, fencing_token, acquired_at, renewed_at, expires_at, metadata, waited, holder_limit)
VALUES ($1, $3, '', $4, $2::timestamptz, $2::timestamptz, $5, '', $6, $7)
ON CONFLICT (lease_name) DO UPDATE SET
    owner_instance_id = excluded.owner_instance_id,
    attempt       = '',
    fencing_token = excluded.fencing_token,
    acquired_at   = CASE WHEN m.expires_at > excluded.renewed_at THEN m.acquired_at ELSE excluded.acquired_at END,
    renewed_at    = excluded.renewed_at,
    expires_at    = CASE WHEN m.expires_at > excluded.renewed_at THEN GREATEST(m.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
    metadata      = '',
    waited        = CASE WHEN m.expires_at > excluded.renewed_at THEN m.waited OR excluded.waited ELSE excluded.waited END,
    holder_limit  = excluded.holder_limit
WHERE m.expires_at <= excluded.renewed_at OR (m.attempt = '' AND m.holder_limit > 1)
RETURNING true`, n.table),
		leave: fmt.Sprintf(`WITH gone AS (DELETE FROM %[1]s WHERE lease_name = $1 AND attempt = $2 AND owner_instance_id = $3)
SELECT EXISTS (SELECT 1 FROM %[1]s WHERE lease_name = $1 AND attempt <> $2)`, n.queue),
		clearTurns: fmt.Sprintf(`UPDATE %[1]s SET turn_started_at = NULL WHERE lease_name = $1 AND attempt <> $2 AND turn_started_at IS NOT NULL`, n.queue),
		// As the exclusive acquire's enqueued, with the attempt's limit.
		enqueue: fmt.Sprintf(`INSERT INTO %[1]s AS q (lease_name, attempt, owner_instance_id, metadata, notify_address, notify_channel, pickup_us, poll, expires_at, holder_limit)
SELECT $1, $3, $4, $5, $6, $7, $8, $9, $2::timestamptz + $10::bigint * interval '1 microsecond', $11
WHERE (SELECT count(*) FROM (SELECT FROM %[1]s x
       WHERE x.lease_name = $1 AND x.attempt <> $3 AND x.expires_at > $2::timestamptz LIMIT %[2]d) n) < %[2]d
ON CONFLICT (lease_name, attempt) DO UPDATE SET
    place           = CASE WHEN q.expires_at > $2::timestamptz THEN q.place ELSE excluded.place END,
    turn_started_at = CASE WHEN q.expires_at > $2::timestamptz THEN q.turn_started_at END,
    metadata        = excluded.metadata,
    notify_address  = excluded.notify_address,
    notify_channel  = excluded.notify_channel,
    pickup_us       = excluded.pickup_us,
    poll            = excluded.poll,
    expires_at      = excluded.expires_at,
    holder_limit    = excluded.holder_limit
WHERE q.owner_instance_id = excluded.owner_instance_id
RETURNING true`, n.queue, backend.MaxQueueEntries),
		queued: fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %[1]s WHERE lease_name = $1 AND attempt = $3 AND owner_instance_id = $4 AND expires_at > $2::timestamptz)`, n.queue),
		// The live entries, in order, with what a hand-off needs.
		heads: fmt.Sprintf(`SELECT attempt, owner_instance_id, pickup_us, holder_limit, metadata, notify_address, notify_channel, poll FROM %[1]s
WHERE lease_name = $1 AND expires_at > $2::timestamptz ORDER BY place`, n.queue),
		// The record after hand-offs that took every free slot: the latest
		// token, an expiry no earlier than theirs, marked while entries
		// remain.
		handed: fmt.Sprintf(`UPDATE %[1]s SET fencing_token = $2, expires_at = GREATEST(expires_at, $3), waited = waited OR $4
WHERE lease_name = $1 AND attempt = '' AND holder_limit > 1`, n.table),
	}
}

// sharedHolding is a live holding as the shared acquire reads it.
type sharedHolding struct {
	attempt, owner string
	token          int64
	expires        time.Time
	left           int64 // microseconds
}

func (h sharedHolding) refusal() backend.Grant {
	return backend.Grant{Holder: h.owner, HolderToken: uint64(h.token), HolderExpiresAt: h.expires,
		HolderExpiresIn: time.Duration(h.left) * time.Microsecond}
}

// errSharedLost: the name's row changed kind between the reads of the
// transaction and its record's upsert (only a writer that does not take
// the name's lock can do that): the transaction is rolled back and tried
// again.
var errSharedLost = errors.New("postgres: the name's record changed during the acquire")

// acquireShared is Acquire with r.Limit > 1: one transaction of several
// statements under the name's advisory lock, committed synchronously.
func (b *Backend) acquireShared(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	var g backend.Grant
	for range 3 {
		var err error
		g, err = b.acquireSharedOnce(ctx, r)
		if !errors.Is(err, errSharedLost) {
			return g, err
		}
	}
	return backend.Grant{}, errSharedLost
}

func (b *Backend) acquireSharedOnce(ctx context.Context, r backend.AcquireRequest) (g backend.Grant, err error) {
	q := &b.sq
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, b.q.lock, b.lockKey(r.Key)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.lockRecord, r.Key); err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, q.begin, r.Key).Scan(&now); err != nil {
			return err
		}
		var (
			live, shared bool
			limit        int32
			rec          sharedHolding
			waited       bool
		)
		err := tx.QueryRow(ctx, q.record, r.Key, now).Scan(&shared, &limit, &rec.owner, &rec.token, &rec.expires, &rec.left, &waited)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			live = true
		}
		if live && !shared { // an exclusive holding: limit 1
			g = rec.refusal()
			g.HeldLimit = 1
			return nil
		}
		if _, err := tx.Exec(ctx, q.drop, r.Key, now, live); err != nil {
			return err
		}
		var holds []sharedHolding
		if live {
			rows, err := tx.Query(ctx, q.live, r.Key, now)
			if err != nil {
				return err
			}
			holds, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (sharedHolding, error) {
				var h sharedHolding
				return h, row.Scan(&h.attempt, &h.owner, &h.token, &h.expires, &h.left)
			})
			if err != nil {
				return err
			}
			if len(holds) == 0 {
				// The record outlived its holdings (a renewal that
				// shortened one): the name is free.
				live, waited = false, false
			}
		}
		if live && int(limit) != r.Limit {
			g = holds[0].refusal()
			g.HeldLimit = int(limit)
			return nil
		}
		for _, h := range holds {
			if h.attempt == r.Attempt && h.owner == r.Owner { // the same attempt again: refresh, keep token
				var expires time.Time
				if err := tx.QueryRow(ctx, q.refresh, r.Key, now, r.Attempt, r.TTL.Microseconds(), r.Metadata).Scan(&expires); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, q.extend, r.Key, expires); err != nil {
					return err
				}
				g = backend.Grant{Acquired: true, Token: uint64(h.token), ExpiresAt: expires}
				return nil
			}
		}
		refuse := func(g0 backend.Grant) error {
			if live && r.Wait {
				if _, err := tx.Exec(ctx, q.mark, r.Key); err != nil {
					return err
				}
			}
			queued, err := b.enqueueShared(ctx, tx, r, now)
			if err != nil {
				return err
			}
			g = g0
			g.Queued = queued
			return nil
		}
		if len(holds) >= r.Limit {
			return refuse(holds[0].refusal())
		}
		var handed []sharedHolding
		if len(holds) > 0 {
			var othersWait bool
			if handed, othersWait, err = b.handFreeShared(ctx, tx, r, holds, now); err != nil {
				return err
			}
			if len(holds)+len(handed) >= r.Limit {
				// Every slot is taken now: the caller is refused as by full
				// slots, naming the holding that ends first.
				last, first := handed[len(handed)-1], holds[0]
				latest := first.expires
				for _, h := range append(holds, handed...) {
					if h.expires.Before(first.expires) {
						first = h
					}
					if h.expires.After(latest) {
						latest = h.expires
					}
				}
				if _, err := tx.Exec(ctx, q.handed, r.Key, last.token, latest, othersWait); err != nil {
					return err
				}
				return refuse(first.refusal())
			}
			holds = append(holds, handed...)
		}
		turn, err := b.sharedTurn(ctx, tx, r, r.Limit-len(holds), now)
		if err != nil {
			return err
		}
		if turn > 0 { // heads of the queue have their turn
			return refuse(backend.Grant{HolderExpiresAt: now.Add(turn), HolderExpiresIn: turn})
		}
		var (
			token   int64
			expires time.Time
		)
		if err := tx.QueryRow(ctx, q.grant, r.Key, now, r.Attempt, r.Owner, r.TTL.Microseconds(), b.q.seq, r.Metadata).Scan(&token, &expires); err != nil {
			return err
		}
		var othersWait bool
		if err := tx.QueryRow(ctx, q.leave, r.Key, r.Attempt, r.Owner).Scan(&othersWait); err != nil {
			return err
		}
		if othersWait {
			if _, err := tx.Exec(ctx, q.clearTurns, r.Key, r.Attempt); err != nil {
				return err
			}
		}
		recExpires := expires
		for _, h := range holds {
			if h.expires.After(recExpires) {
				recExpires = h.expires
			}
		}
		var ok bool
		err = tx.QueryRow(ctx, q.upsertRecord, r.Key, now, recordOwner, token, recExpires, othersWait, int32(r.Limit)).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) {
			return errSharedLost
		}
		if err != nil {
			return err
		}
		g = backend.Grant{Acquired: true, Token: uint64(token), ExpiresAt: expires}
		return nil
	})
	if err != nil {
		return backend.Grant{}, err
	}
	return g, nil
}

// handFreeShared hands the free slots of a name with live holdings holds to
// the live entries of its limit queued ahead of r's attempt, in order, each
// for its pickup window, as a release hands on its slot (backend/limit.go):
// the heads need not poll for a slot that expiry freed, which on a busy
// name they may never do while the other slots are handed on to them.
// Entries of another limit, or of an attempt that holds already, are
// dropped on the way. It answers the holdings handed (in token order) and
// whether entries remain.
func (b *Backend) handFreeShared(ctx context.Context, tx pgx.Tx, r backend.AcquireRequest, holds []sharedHolding, now time.Time) ([]sharedHolding, bool, error) {
	q := &b.sq
	type entry struct {
		attempt, owner, metadata, address, channel string
		pickup, poll                               int64
		limit                                      int32
	}
	rows, err := tx.Query(ctx, q.heads, r.Key, now)
	if err != nil {
		return nil, false, err
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (entry, error) {
		var e entry
		return e, row.Scan(&e.attempt, &e.owner, &e.pickup, &e.limit, &e.metadata, &e.address, &e.channel, &e.poll)
	})
	if err != nil {
		return nil, false, err
	}
	holding := map[string]bool{}
	for _, h := range holds {
		holding[h.attempt] = true
	}
	var (
		handed []sharedHolding
		gone   []string
	)
	free := r.Limit - len(holds)
	i := 0
	for ; i < len(entries) && free > 0; i++ {
		e := entries[i]
		if e.attempt == r.Attempt && e.owner == r.Owner {
			break // the caller's own place: it is granted as usual
		}
		gone = append(gone, e.attempt)
		if int(e.limit) != r.Limit || holding[e.attempt] {
			continue
		}
		h := sharedHolding{attempt: e.attempt, owner: e.owner, left: e.pickup}
		if err := tx.QueryRow(ctx, q.grant, r.Key, now, e.attempt, e.owner, e.pickup, b.q.seq, e.metadata).Scan(&h.token, &h.expires); err != nil {
			return nil, false, err
		}
		if e.channel != "" {
			msg := fmt.Sprintf("1 %d %d %s %s %d %s %s", h.token, e.poll, e.address, e.attempt, len(e.owner), e.owner, r.Key)
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, e.channel, msg); err != nil {
				return nil, false, err
			}
		}
		handed = append(handed, h)
		free--
	}
	if len(gone) > 0 {
		if _, err := tx.Exec(ctx, q.lapse, r.Key, gone); err != nil {
			return nil, false, err
		}
	}
	return handed, i < len(entries), nil
}

// sharedTurn applies the heads' turns to an acquire that finds free slots
// free (backend/limit.go): 0 when the caller may be granted (fewer than free
// live entries ahead of it); otherwise the first free entries have their
// turn, each for its pickup window from when a slot was first found free for
// it, and the answer is the shortest turn left. A head that let its turn
// pass leaves the queue.
func (b *Backend) sharedTurn(ctx context.Context, tx pgx.Tx, r backend.AcquireRequest, free int, now time.Time) (time.Duration, error) {
	q := &b.sq
	if _, err := tx.Exec(ctx, q.dropEntries, r.Key, now); err != nil {
		return 0, err
	}
	type entry struct {
		attempt, owner string
		pickup         int64
		started        *time.Time
	}
	rows, err := tx.Query(ctx, q.entries, r.Key)
	if err != nil {
		return 0, err
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (entry, error) {
		var e entry
		return e, row.Scan(&e.attempt, &e.owner, &e.pickup, &e.started)
	})
	if err != nil {
		return 0, err
	}
	var starts, lapsed []string
	shortest := time.Duration(-1)
	for {
		pos := len(entries)
		for i, e := range entries {
			if e.attempt == r.Attempt && e.owner == r.Owner {
				pos = i
				break
			}
		}
		if pos < free {
			shortest = 0
			break
		}
		shortest = time.Duration(1 << 62)
		lapse := -1
		for i := 0; i < free; i++ {
			e := &entries[i]
			if e.started == nil {
				t := now
				e.started = &t
				starts = append(starts, e.attempt)
			}
			left := e.started.Add(time.Duration(e.pickup) * time.Microsecond).Sub(now)
			if left <= 0 {
				lapse = i
				break
			}
			shortest = min(shortest, left)
		}
		if lapse < 0 {
			break
		}
		lapsed = append(lapsed, entries[lapse].attempt)
		entries = append(entries[:lapse], entries[lapse+1:]...)
	}
	if len(lapsed) > 0 {
		if _, err := tx.Exec(ctx, q.lapse, r.Key, lapsed); err != nil {
			return 0, err
		}
	}
	if len(starts) > 0 {
		if _, err := tx.Exec(ctx, q.startTurns, r.Key, now, starts); err != nil {
			return 0, err
		}
	}
	return shortest, nil
}

// enqueueShared queues a refused waiting attempt that asked for it, and
// reports whether it has an entry.
func (b *Backend) enqueueShared(ctx context.Context, tx pgx.Tx, r backend.AcquireRequest, now time.Time) (bool, error) {
	q := r.Queue
	if !r.Wait || q.EntryTTL <= 0 {
		return false, nil
	}
	channel := ""
	if q.Notify != "" {
		channel = b.handOffChannel(q.Notify)
	}
	var queued bool
	err := tx.QueryRow(ctx, b.sq.enqueue, r.Key, now, r.Attempt, r.Owner, r.Metadata, q.Notify, channel,
		q.Pickup.Microseconds(), int64(q.Poll), q.EntryTTL.Microseconds(), int32(r.Limit)).Scan(&queued)
	if errors.Is(err, pgx.ErrNoRows) {
		err = tx.QueryRow(ctx, b.sq.queued, r.Key, now, r.Attempt, r.Owner).Scan(&queued)
	}
	return queued, err
}
