package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// nowUs is the server's UTC clock in microseconds since the Unix epoch, by
// arithmetic on UTC_TIMESTAMP(6), so that no time zone applies.
const nowUs = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

// step runs fn on key's rows in one READ COMMITTED transaction: it locks the
// name's row of the lease table (inserting it when missing: INSERT ... ON
// DUPLICATE KEY UPDATE locks the row either way), reads the clock and the
// name's holdings and queue in one statement, lets fn change them and
// writes the changes, then commits. Every writer of a name's rows holds
// that lock, except Renew, which only moves a holding's expiry forward:
// the deletion of a holding for having expired checks its expiry again and
// rolls back when a renewal came in between (errConflict, retried).
func (b *Backend) step(ctx context.Context, key string, fn func(*keyState)) (*keyState, error) {
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	s, err := b.stepIn(ctx, tx, key, fn)
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, &commitError{err}
	}
	return s, nil
}

func (b *Backend) stepIn(ctx context.Context, tx *sql.Tx, key string, fn func(*keyState)) (*keyState, error) {
	if _, err := tx.ExecContext(ctx, b.q.lock, key); err != nil {
		return nil, err
	}
	s, err := b.load(ctx, tx, key)
	if err != nil {
		return nil, err
	}
	fn(s)
	return s, b.save(ctx, tx, s)
}

// load reads the clock, the holdings (by token) and the queue (by position)
// of key.
func (b *Backend) load(ctx context.Context, tx *sql.Tx, key string) (*keyState, error) {
	rows, err := tx.QueryContext(ctx, b.q.load, key, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	s := &keyState{key: key}
	for rows.Next() {
		var (
			kind, limit          int
			id, poll             uint64
			owner, attempt, meta string
			notify               string
			expires, pickup, now int64
			extra                sql.NullInt64
		)
		if err := rows.Scan(&kind, &id, &owner, &attempt, &meta, &limit, &expires, &pickup, &notify, &poll, &extra, &now); err != nil {
			return nil, err
		}
		s.now = now
		switch kind {
		case 1:
			s.holds = append(s.holds, &hold{token: id, owner: owner, attempt: attempt, metadata: meta, limit: limit, expires: expires, acquired: extra.Int64})
		case 2:
			s.queue = append(s.queue, &entry{position: id, owner: owner, attempt: attempt, metadata: meta, limit: limit,
				expires: expires, pickup: pickup, notify: notify, poll: poll, turn: extra.Int64})
		}
	}
	return s, rows.Err()
}

// save writes s's changes: deletions first, then updates, then inserts in
// the order they were made (so that tokens follow it), and drops the name's
// row when nothing of the name is left.
func (b *Backend) save(ctx context.Context, tx *sql.Tx, s *keyState) error {
	for _, g := range s.goneHolds {
		if !g.expired {
			if _, err := tx.ExecContext(ctx, b.q.deleteHold, g.token); err != nil {
				return err
			}
			continue
		}
		res, err := tx.ExecContext(ctx, b.q.deleteExpiredHold, g.token, s.now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("%w: holding %d of %q", errConflict, g.token, s.key)
		}
	}
	if len(s.goneEntries) > 0 {
		args := make([]any, len(s.goneEntries))
		for i, p := range s.goneEntries {
			args[i] = p
		}
		stmt := b.q.deleteEntries + "(" + strings.TrimSuffix(strings.Repeat("?,", len(args)), ",") + ")"
		if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
			return err
		}
	}
	for _, h := range s.holds {
		switch {
		case h.fresh:
			res, err := tx.ExecContext(ctx, b.q.insertHold, s.key, h.owner, h.attempt, h.limit, h.acquired, h.expires, h.metadata)
			if err != nil {
				return err
			}
			id, err := res.LastInsertId()
			if err != nil {
				return err
			}
			h.token, h.fresh = uint64(id), false
		case h.dirty:
			if _, err := tx.ExecContext(ctx, b.q.updateHold, h.expires, h.metadata, h.token); err != nil {
				return err
			}
		}
	}
	for _, e := range s.queue {
		var turn any
		if e.turn != 0 {
			turn = e.turn
		}
		switch {
		case e.fresh:
			if _, err := tx.ExecContext(ctx, b.q.insertEntry, s.key, e.owner, e.attempt, e.metadata, e.notify, e.limit, e.pickup, e.poll, e.expires, turn); err != nil {
				return err
			}
		case e.dirty:
			if _, err := tx.ExecContext(ctx, b.q.updateEntry, e.metadata, e.notify, e.limit, e.pickup, e.poll, e.expires, turn, e.position); err != nil {
				return err
			}
		}
	}
	if len(s.holds) == 0 && len(s.queue) == 0 {
		if _, err := tx.ExecContext(ctx, b.q.unlockName, s.key); err != nil {
			return err
		}
	}
	return nil
}

// queries are the statements on one lease table.
type queries struct {
	lock, load                    string
	deleteHold, deleteExpiredHold string
	deleteEntries                 string
	insertHold, updateHold        string
	insertEntry, updateEntry      string
	unlockName                    string
	renew, renewRead              string
	abandoned                     string
	inspect, holders, list        string
}

func newQueries(n names) queries {
	const live = "expires_us > " + nowUs
	return queries{
		lock: "INSERT INTO " + n.leases + " (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name",
		load: "SELECT 1, token, owner, attempt, metadata, holder_limit, expires_us, 0, '', 0, acquired_us, " + nowUs +
			" FROM " + n.holds + " WHERE name = ?" +
			" UNION ALL SELECT 2, position, owner, attempt, metadata, holder_limit, expires_us, pickup_us, notify, poll, turn_us, " + nowUs +
			" FROM " + n.queue + " WHERE name = ?" +
			" UNION ALL SELECT 0, 0, '', '', '', 0, 0, 0, '', 0, NULL, " + nowUs +
			" ORDER BY 1, 2",
		deleteHold:        "DELETE FROM " + n.holds + " WHERE token = ?",
		deleteExpiredHold: "DELETE FROM " + n.holds + " WHERE token = ? AND expires_us <= ?",
		deleteEntries:     "DELETE FROM " + n.queue + " WHERE position IN ",
		insertHold: "INSERT INTO " + n.holds + " (name, owner, attempt, holder_limit, acquired_us, expires_us, metadata)" +
			" VALUES (?, ?, ?, ?, ?, ?, ?)",
		updateHold: "UPDATE " + n.holds + " SET expires_us = ?, metadata = ?, renewals = renewals + 1 WHERE token = ?",
		insertEntry: "INSERT INTO " + n.queue + " (name, owner, attempt, metadata, notify, holder_limit, pickup_us, poll, expires_us, turn_us)" +
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		updateEntry: "UPDATE " + n.queue + " SET metadata = ?, notify = ?, holder_limit = ?, pickup_us = ?, poll = ?, expires_us = ?, turn_us = ?" +
			" WHERE position = ?",
		unlockName: "DELETE FROM " + n.leases + " WHERE name = ?",
		// renewals changes on every renewal, so that the row counts as
		// changed (MySQL reports changed rows, not matched ones) even when
		// two renewals set the same expiry.
		renew: "UPDATE " + n.holds + " SET expires_us = " + nowUs + " + ?, renewals = renewals + 1" +
			" WHERE token = ? AND name = ? AND owner = ? AND attempt = ? AND " + live,
		// Names with an expired holding (by the expires index) or an
		// expired queue entry, for the sweep.
		abandoned: "(SELECT name FROM " + n.holds + " WHERE expires_us <= " + nowUs + " ORDER BY expires_us LIMIT ?)" +
			" UNION (SELECT name FROM " + n.queue + " WHERE expires_us <= " + nowUs + " LIMIT ?)",
		renewRead: "SELECT expires_us FROM " + n.holds + " WHERE token = ?",
		inspect: "SELECT owner, token, expires_us, metadata, holder_limit, " + nowUs + " FROM " + n.holds +
			" WHERE name = ? AND " + live + " ORDER BY expires_us, token LIMIT 1",
		holders: "SELECT owner, token, expires_us, metadata, holder_limit, " + nowUs + " FROM " + n.holds +
			" WHERE name = ? AND " + live + " ORDER BY token",
		list: "SELECT name, owner, token, expires_us, metadata, holder_limit, " + nowUs + " FROM " + n.holds +
			" WHERE name >= ? AND LEFT(name, LENGTH(?)) = ? AND " + live + " ORDER BY name, token",
	}
}
