package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockPGLock runs the protocol of cirello.io/pglock. The module itself cannot
// be fetched through the module proxy on the machines this was written on, so
// pglockLocker sends the statements pglock sends, with pglock's waiting rule,
// on the same pgx pool settings as leasehold (which, if anything, makes it
// faster than pglock on database/sql and lib/pq):
//
//   - acquire: a SERIALIZABLE transaction upserting a fresh random record
//     version number (RVN) where the row is free (RVN NULL) or still shows the
//     RVN this waiter saw on its last attempt (no heartbeat since: the holder
//     is presumed dead), then SELECT ... FOR UPDATE to see whether it won;
//     serialization failures are retried at once;
//   - a waiter that did not win sleeps for the lease duration before trying
//     again (pglock's AcquireContext);
//   - a holder heartbeats (a new RVN) every heartbeat period, pglock's
//     default ratio of lease/4;
//   - release sets the RVN to NULL where it is still the holder's.
const lockPGLock = "pglock-protocol"

type pglockLocker struct {
	cfg   runConfig
	pool  *pgxpool.Pool
	table string
	st    lockStats
}

func newPGLockLocker(ctx context.Context, c runConfig) (*pglockLocker, error) {
	pool, err := postgresPool(ctx, c)
	if err != nil {
		return nil, err
	}
	l := &pglockLocker{cfg: c, pool: pool, table: pgx.Identifier{benchSchema, "pglock_locks"}.Sanitize()}
	for _, stmt := range []string{
		"CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{benchSchema}.Sanitize(),
		"CREATE TABLE IF NOT EXISTS " + l.table + " (name character varying(255) PRIMARY KEY, record_version_number character varying(255), data bytea)",
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil && !isUniqueViolation(err) {
			pool.Close()
			return nil, err
		}
	}
	return l, nil
}

// isUniqueViolation is what CREATE ... IF NOT EXISTS run by several processes
// at once may still fail with.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

func (l *pglockLocker) leaseDuration() time.Duration { return l.cfg.TTL }

func (l *pglockLocker) retryDelay() time.Duration {
	if l.cfg.PeerPoll > 0 {
		return l.cfg.PeerPoll
	}
	return l.leaseDuration()
}

func (l *pglockLocker) acquire(ctx context.Context, name string) (holding, error) {
	wctx, cancel := waitCtx(ctx, l.cfg)
	defer cancel()
	seen := ""
	for first := true; ; first = false {
		if !first {
			l.st.pollWakes.Add(1)
		}
		rvn, won, actual, err := l.try(wctx, name, seen)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if wctx.Err() != nil {
				return nil, errNotAcquired
			}
			return nil, err
		}
		if won {
			h := &pglockHolding{l: l, name: name}
			h.rvn.Store(&rvn)
			hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
			h.stop = stop
			h.wg.Go(func() { h.heartbeat(hctx) })
			return h, nil
		}
		seen = actual
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errNotAcquired
		case <-time.After(l.retryDelay()):
		}
	}
}

// try is one acquire transaction, retried at once on serialization failures.
func (l *pglockLocker) try(ctx context.Context, name, seen string) (rvn string, won bool, actual string, err error) {
	r := make([]byte, 16)
	_, _ = rand.Read(r)
	rvn = hex.EncodeToString(r)
	for {
		err = l.tx(ctx, func(tx pgx.Tx) (bool, error) {
			l.st.roundTrips.Add(2)
			if _, err := tx.Exec(ctx, `INSERT INTO `+l.table+` (name, record_version_number, data) VALUES ($1, $2, NULL)
				ON CONFLICT (name) DO UPDATE SET record_version_number = $2
				WHERE `+l.table+`.record_version_number IS NULL OR `+l.table+`.record_version_number = $3`, name, rvn, seen); err != nil {
				return false, err
			}
			var a *string
			if err := tx.QueryRow(ctx, `SELECT record_version_number FROM `+l.table+` WHERE name = $1 FOR UPDATE`, name).Scan(&a); err != nil {
				return false, err
			}
			if a != nil {
				actual = *a
			}
			won = actual == rvn
			return won, nil
		})
		if !serializationFailed(err) {
			return rvn, won, actual, err
		}
	}
}

// tx runs fn in a SERIALIZABLE transaction and commits when fn says so.
func (l *pglockLocker) tx(ctx context.Context, fn func(pgx.Tx) (bool, error)) error {
	tx, err := l.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	commit, err := fn(tx)
	if err != nil || !commit {
		return err
	}
	l.st.roundTrips.Add(1)
	return tx.Commit(ctx)
}

func serializationFailed(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40001"
}

func (l *pglockLocker) stats() *lockStats { return &l.st }

func (l *pglockLocker) close(context.Context) error {
	l.pool.Close()
	return nil
}

type pglockHolding struct {
	l        *pglockLocker
	name     string
	rvn      atomic.Pointer[string]
	released atomic.Bool // pglock's IsReleased: set when a heartbeat finds the lock taken
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

func (h *pglockHolding) token() uint64         { return 0 }
func (h *pglockHolding) lost() <-chan struct{} { return nil }
func (h *pglockHolding) held() bool            { return !h.released.Load() }

// update sets the RVN from old to next (next nil: release) where it is still
// old; it reports whether it was.
func (h *pglockHolding) update(ctx context.Context, old string, next *string) (bool, error) {
	var ok bool
	for {
		err := h.l.tx(ctx, func(tx pgx.Tx) (bool, error) {
			h.l.st.roundTrips.Add(1)
			tag, err := tx.Exec(ctx, `UPDATE `+h.l.table+` SET record_version_number = $3 WHERE name = $1 AND record_version_number = $2`, h.name, old, next)
			ok = err == nil && tag.RowsAffected() == 1
			return ok, err
		})
		if !serializationFailed(err) {
			return ok, err
		}
	}
}

// heartbeat refreshes the RVN every lease/4 until stopped, as pglock's
// heartbeat goroutine does; a heartbeat that finds the RVN changed marks the
// lock released.
func (h *pglockHolding) heartbeat(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.l.leaseDuration() / 4):
		}
		r := make([]byte, 16)
		_, _ = rand.Read(r)
		next := hex.EncodeToString(r)
		ok, err := h.update(ctx, *h.rvn.Load(), &next)
		if err != nil {
			continue
		}
		if !ok {
			h.released.Store(true)
			return
		}
		h.rvn.Store(&next)
	}
}

func (h *pglockHolding) release(ctx context.Context) (bool, error) {
	h.stop()
	h.wg.Wait()
	ok, err := h.update(ctx, *h.rvn.Load(), nil)
	if err != nil {
		return false, err
	}
	return !ok, nil
}
