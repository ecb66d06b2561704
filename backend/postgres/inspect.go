package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/backend"
)

// defaultListPage is how many holdings List reads per statement: no
// connection is held while fn runs, and each page is a short read.
const defaultListPage = 500

// holdingColumns reads a live holding, with the time it has left measured
// on the statement's clock c.now.
const holdingColumns = `l.lease_name, l.owner_instance_id, l.fencing_token, l.expires_at, l.metadata,
       GREATEST(0, extract(epoch FROM l.expires_at - c.now) * 1000000)::bigint, l.holder_limit`

func scanHolding(row pgx.Row) (backend.Holder, error) {
	var (
		h         backend.Holder
		token     int64
		remaining int64
		limit     int32
	)
	if err := row.Scan(&h.Key, &h.Owner, &token, &h.ExpiresAt, &h.Metadata, &remaining, &limit); err != nil {
		return backend.Holder{}, err
	}
	h.Token, h.ExpiresIn, h.Limit = uint64(token), time.Duration(remaining)*time.Microsecond, int(limit)
	return h, nil
}

// Inspect returns the live holding of key (held is false when the key is
// free, released or expired by the server's clock). A key that breaks the
// limits gives an error wrapping backend.ErrInvalidRequest; faults are
// retried and returned wrapped.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	var h backend.Holder
	err := b.retry(ctx, "inspect", func(ctx context.Context) error {
		var err error
		h, err = scanHolding(b.pool.QueryRow(ctx, b.q.inspect, key))
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return backend.Holder{}, false, nil
	case err != nil:
		return backend.Holder{}, false, fmt.Errorf("postgres: inspect %q: %w", key, err)
	}
	return h, true, nil
}

// List calls fn with every live holding whose key starts with prefix ("" for
// all), in byte order of the keys, until fn returns false. It reads pages of
// holdings by primary-key range (plain reads: nothing is locked, writers are
// never blocked) and holds no connection while fn runs, so a holding granted,
// released or expired meanwhile may or may not be seen. A prefix that is not
// valid UTF-8 or contains a NUL byte gives an error wrapping
// backend.ErrInvalidRequest.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	if !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 {
		return fmt.Errorf("%w: prefix is not valid UTF-8 or contains a NUL byte", backend.ErrInvalidRequest)
	}
	upper, bounded := prefixEnd(prefix)
	var (
		after      *string // the key of the previous page's last holding
		afterToken int64   // and its token
	)
	for {
		var page []backend.Holder
		err := b.retry(ctx, "list", func(ctx context.Context) error {
			page = page[:0]
			rows, err := b.pool.Query(ctx, b.q.list, prefix, upper, bounded, after, b.listPage, afterToken)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				h, err := scanHolding(rows)
				if err != nil {
					return err
				}
				page = append(page, h)
			}
			return rows.Err()
		})
		if err != nil {
			return fmt.Errorf("postgres: list %q: %w", prefix, err)
		}
		for _, h := range page {
			if !fn(h) {
				return nil
			}
		}
		if len(page) < b.listPage {
			return nil
		}
		last := page[len(page)-1]
		after, afterToken = &last.Key, int64(last.Token)
	}
}

// prefixEnd returns the least string above every string that starts with
// prefix, in byte order: prefix with its last code point incremented, after
// dropping trailing U+10FFFF (which has no successor). UTF-8 preserves code
// point order under byte comparison, so [prefix, end) is exactly the keys
// starting with prefix. bounded is false when there is no such string (an
// empty prefix, or one made only of U+10FFFF).
func prefixEnd(prefix string) (end string, bounded bool) {
	rs := []rune(prefix)
	for len(rs) > 0 {
		last := rs[len(rs)-1]
		switch {
		case last == utf8.MaxRune:
			rs = rs[:len(rs)-1]
			continue
		case last == 0xD7FF: // the next code point is past the surrogates
			rs[len(rs)-1] = 0xE000
		default:
			rs[len(rs)-1] = last + 1
		}
		return string(rs), true
	}
	return "", false
}

// Revoke ends the live holding of key by force when its token is token (0:
// whichever holding is live), and returns it. The holder is fenced: its next
// renewal or release names a holding that no longer exists (ErrNotHeld), and
// the sequence never issues its token again. The key is handed on to the
// head of its waiter queue, and waiters are notified, as after a release,
// under the name's advisory lock, with synchronous commit.
//
// The answer is exact across the retries: the transaction learns its own
// id (txid_current) before it does anything, and commits only when it
// removed a holding. When the answer to its COMMIT is lost, Revoke ends
// the server process that ran it if it is still there (nothing more can
// come from its client) and reads the transaction's status (txid_status):
// committed means this call removed the holding, aborted that it did not
// (it is then tried again). When even that cannot be read before ctx ends,
// the error wraps backend.ErrRevokeUnconfirmed.
func (b *Backend) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	if token > math.MaxInt64 {
		return backend.Holder{}, false, nil // no holding can have this token
	}
	var (
		h       backend.Holder
		removed bool
		lost    *revokeTx // sent its COMMIT, answer lost, not settled yet
	)
	err := b.retry(ctx, "revoke", func(ctx context.Context) error {
		if lost != nil {
			committed, err := b.settle(ctx, lost)
			if err != nil {
				return err
			}
			if committed {
				h, removed = lost.h, true
				return nil
			}
			lost = nil // aborted: nothing happened; send it again
		}
		var err error
		var left *revokeTx
		h, removed, lost, left, err = b.revokeOnce(ctx, key, token)
		if left != nil {
			// Its connection is back in the pool (a pool of one included).
			_, _ = b.terminate(ctx, left)
		}
		return err
	})
	switch {
	case err != nil && lost != nil:
		return backend.Holder{}, false, fmt.Errorf("postgres: revoke %q: %w: %w", key, backend.ErrRevokeUnconfirmed, err)
	case err != nil:
		return backend.Holder{}, false, fmt.Errorf("postgres: revoke %q: %w", key, err)
	}
	return h, removed, nil
}

// revokeTx is a revoke's transaction whose COMMIT was sent: its id, the
// server process that ran it, and the holding it removed (it commits only
// then).
type revokeTx struct {
	xid int64
	pid int32
	h   backend.Holder
}

// revokeOnce runs one revoke transaction in three round trips on one
// connection: BEGIN and its identity (no lock yet, so that a session left
// behind by a dead link holds nothing), then the lock and the revoke, then
// COMMIT, or ROLLBACK when nothing was removed. lost is set when COMMIT was
// sent and its answer is missing. left is set when the connection failed
// after the lock and before COMMIT: over a link that died silently its
// server process would stay in the transaction, holding the name's lock,
// until the server noticed, and the next try would wait for the lock; the
// caller ends it (terminate) once the connection is back in the pool.
func (b *Backend) revokeOnce(ctx context.Context, key string, token uint64) (h backend.Holder, removed bool, lost, left *revokeTx, err error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return backend.Holder{}, false, nil, nil, err
	}
	defer conn.Release() // closed by the pool unless idle outside a transaction
	tx := &revokeTx{}
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	batch.Queue("SELECT txid_current(), pg_backend_pid()").QueryRow(func(r pgx.Row) error { return r.Scan(&tx.xid, &tx.pid) })
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return backend.Holder{}, false, nil, nil, err
	}
	leftIfBroken := func() *revokeTx {
		if conn.Conn().IsClosed() {
			return tx
		}
		return nil // a working connection: its release rolls the transaction back
	}
	batch = &pgx.Batch{}
	batch.Queue(b.q.lock, b.lockKey(key))
	batch.Queue(b.q.revoke, key, int64(token), b.channel, b.q.seq).QueryRow(func(r pgx.Row) error {
		var err error
		tx.h, err = scanHolding(r)
		if errors.Is(err, pgx.ErrNoRows) {
			tx.h, err = backend.Holder{}, nil // tokens are never 0: none removed
		}
		return err
	})
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return backend.Holder{}, false, nil, leftIfBroken(), err
	}
	// COMMIT and ROLLBACK go by the simple protocol: one message, so that
	// a failure after it was sent is told from one before.
	pg := conn.Conn().PgConn()
	if tx.h.Token == 0 {
		_, err := pg.Exec(ctx, "ROLLBACK").ReadAll() // nothing was changed, whatever its answer
		if err != nil {
			return backend.Holder{}, false, nil, leftIfBroken(), nil
		}
		return backend.Holder{}, false, nil, nil, nil
	}
	if b.revokeHook != nil {
		b.revokeHook("commit")
	}
	if _, err := pg.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return backend.Holder{}, false, nil, leftIfBroken(), err // refused: not committed
		}
		// Whether it was sent is not known either: pgconn reports a reply
		// lost while the COMMIT was being flushed as "never sent"
		// (SafeToRetry). The transaction's status will tell.
		return backend.Holder{}, false, tx, nil, err
	}
	return tx.h, true, nil, nil, nil
}

// terminate ends the server process of tx if it still runs tx, and reports
// whether it did. A process that has ended cannot be running tx, so a pid
// reused by another session is never hit.
func (b *Backend) terminate(ctx context.Context, tx *revokeTx) (bool, error) {
	var ended bool
	err := b.pool.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM pg_stat_activity
		WHERE pid = $1 AND backend_xid::text::bigint = $2::bigint % 4294967296`, tx.pid, tx.xid).Scan(&ended)
	return ended, err
}

// settle finds out whether tx, whose COMMIT was sent but whose answer was
// lost, committed: while it is in progress (the COMMIT has not reached the
// server, or its process waits on a dead link) its process is ended, which
// aborts it, and its status is read again.
func (b *Backend) settle(ctx context.Context, tx *revokeTx) (committed bool, err error) {
	if b.revokeHook != nil {
		b.revokeHook("settle")
	}
	for {
		var status *string
		if err := b.pool.QueryRow(ctx, "SELECT txid_status($1)", tx.xid).Scan(&status); err != nil {
			return false, err
		}
		switch {
		case status == nil:
			return false, fmt.Errorf("transaction %d is too old to be looked up", tx.xid)
		case *status == "committed":
			return true, nil
		case *status == "aborted":
			return false, nil
		}
		if _, err := b.terminate(ctx, tx); err != nil {
			return false, err
		}
		// The process ends shortly after the signal: only the server can
		// tell when, so ask again.
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
}
