package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/roundtrip"
)

// Backend is the MySQL/MariaDB lease store. It is safe for concurrent use.
type Backend struct {
	// Unsupported answers Batch, WatchReleases, WatchHandOffs and Shard: one
	// transaction per call, no cheap notification, one shard.
	backend.Unsupported

	db    *sql.DB
	names names
	q     queries
	cfg   config
	log   *slog.Logger

	// serverOK is set once checkServer passed (before the first Acquire).
	serverOK atomic.Bool

	// lastSweep (UnixNano) and sweeping pace and serialise maybeSweep.
	lastSweep atomic.Int64
	sweeping  atomic.Bool

	slots     chan struct{} // one token per call in flight (call)
	trips     *roundtrip.Runner
	closing   chan struct{}
	closeOnce sync.Once
}

var _ backend.Backend = (*Backend)(nil)

// New returns a backend that keeps leases in the tables of WithTable
// (default leasehold.leases) of db. It does not create them (see
// EnsureSchema and CreateScript) and does not touch the database: the
// server's durability is checked before the first Acquire. It runs at most
// as many calls at once as db's pool allows (db.SetMaxOpenConns, read here:
// set it before New), or DefaultMaxCalls when the pool is unlimited. db
// stays the caller's: Close does not close it.
func New(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, errors.New("mysql: New: nil *sql.DB")
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n, err := newNames(cfg.schema, cfg.table)
	if err != nil {
		return nil, err
	}
	closing := make(chan struct{})
	return &Backend{
		db: db, names: n, q: newQueries(n), cfg: cfg,
		log:     cfg.logger.With("backend", "mysql", "table", n.String()),
		slots:   make(chan struct{}, callBound(db.Stats().MaxOpenConnections, cfg.maxCalls)),
		trips:   roundtrip.New(closing),
		closing: closing,
	}, nil
}

// Info reports "mysql", shared across processes, with a waiter queue
// (without hand-off notices: a waiter handed a name learns it at its next
// poll), granting names with up to backend.MaxLimit holders.
func (b *Backend) Info() backend.Info {
	return backend.Info{Name: "mysql", Queue: true, MaxLimit: backend.MaxLimit}
}

// Close ends the backend's idle I/O goroutines. The *sql.DB is the
// caller's: Close leaves it open.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() { close(b.closing) })
	return nil
}

// checkServerOnce runs checkServer until it has passed once.
func (b *Backend) checkServerOnce(ctx context.Context) error {
	if b.serverOK.Load() {
		return nil
	}
	if err := checkServer(ctx, b.db); err != nil {
		return err
	}
	b.serverOK.Store(true)
	return nil
}

// Acquire grants r.Key when it has a free slot (backend/limit.go), or
// refreshes the live holding r.Attempt made, keeping the name's waiter
// queue (backend/queue.go): one CALL of the acquire procedure (procs.go),
// whose transaction takes the name's lock and commits before it answers.
func (b *Backend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	if err := b.Info().CheckLimit(r.Limit); err != nil {
		return backend.Grant{}, err
	}
	b.maybeSweep(ctx)
	var g backend.Grant
	err := b.retry(ctx, "acquire", []string{r.Key}, func(ctx context.Context) error {
		if err := b.checkServerOnce(ctx); err != nil {
			return err
		}
		var (
			kind, heldLimit int
			token           uint64
			expires, now    int64
			holder          string
			queued          bool
		)
		err := b.db.QueryRowContext(ctx, b.q.acquire, r.Key, r.Owner, r.Attempt, r.Metadata, max(r.Limit, 1), micros(r.TTL),
			r.Wait, micros(r.Queue.EntryTTL), r.Queue.Poll, r.Queue.Notify, micros(r.Queue.Pickup), backend.MaxQueueEntries,
		).Scan(&kind, &token, &expires, &holder, &heldLimit, &queued, &now)
		if err != nil {
			return err
		}
		switch kind {
		case 1:
			g = backend.Grant{Acquired: true, Token: token, ExpiresAt: toTime(expires)}
		case 2:
			g = backend.Grant{Holder: holder, HolderToken: token, HolderExpiresAt: toTime(expires),
				HolderExpiresIn: until(expires, now), HeldLimit: heldLimit, Queued: queued}
		case 3: // the heads' turn: no holder named
			g = backend.Grant{HolderExpiresAt: toTime(expires), HolderExpiresIn: until(expires, now), Queued: queued}
		default:
			return fmt.Errorf("the acquire procedure answered an unknown kind %d", kind)
		}
		return nil
	})
	if err != nil {
		return backend.Grant{}, fmt.Errorf("mysql: acquire %q: %w", r.Key, err)
	}
	return g, nil
}

// Renew extends the live holding named by r in one UPDATE (renewals never
// take the name's lock: a procedure deletes a holding for having expired
// only when its latest committed expiry has passed), then reads its new
// expiry.
func (b *Backend) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	var g backend.Grant
	held := true
	err := b.retry(ctx, "renew", []string{r.Key}, func(ctx context.Context) error {
		res, err := b.db.ExecContext(ctx, b.q.renew, micros(r.TTL), r.Token, r.Key, r.Owner, r.Attempt)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if held = n == 1; !held {
			return nil
		}
		var expires int64
		if err := b.db.QueryRowContext(ctx, b.q.renewRead, r.Token).Scan(&expires); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		g = backend.Grant{Acquired: true, Token: r.Token, ExpiresAt: toTime(expires)}
		return nil
	})
	if err != nil {
		return backend.Grant{}, fmt.Errorf("mysql: renew %q: %w", r.Key, err)
	}
	if !held {
		return backend.Grant{}, fmt.Errorf("mysql: renew %q: %w", r.Key, backend.ErrNotHeld)
	}
	return g, nil
}

// RenewBatch renews one holding after another.
func (b *Backend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	return backend.RenewEach(ctx, b, rs)
}

// Release ends the holding named by r and hands a live one on to the head
// of the queue, or removes the attempt's own queue entry: one CALL of the
// release procedure.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	err := b.retry(ctx, "release", []string{r.Key}, func(ctx context.Context) error {
		var handed uint64
		if err := b.db.QueryRowContext(ctx, b.q.release, r.Key, r.Owner, r.Attempt, r.Token).Scan(&handed); err != nil {
			return err
		}
		b.logHandOff(ctx, r.Key, handed)
		return nil
	})
	if err != nil {
		return fmt.Errorf("mysql: release %q: %w", r.Key, err)
	}
	return nil
}

// Revoke ends the live holding of key of token (0: the one that ends first)
// and hands it on as a release does: one CALL of the revoke procedure. It
// is run again only after failures that certainly rolled it back, so its
// answer is about this call alone.
func (b *Backend) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	var h backend.Holder
	err := b.retryWhen(ctx, "revoke", []string{key}, isRolledBack, func(ctx context.Context) error {
		var (
			expires, now int64
			handed       uint64
		)
		h = backend.Holder{Key: key}
		if err := b.db.QueryRowContext(ctx, b.q.revoke, key, token).Scan(&h.Token, &h.Owner, &h.Metadata, &h.Limit, &expires, &now, &handed); err != nil {
			return err
		}
		h.ExpiresAt, h.ExpiresIn = toTime(expires), until(expires, now)
		b.logHandOff(ctx, key, handed)
		return nil
	})
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("mysql: revoke %q: %w", key, err)
	}
	if h.Token == 0 {
		return backend.Holder{}, false, nil
	}
	return h, true, nil
}

// logHandOff logs the holding a release or revoke handed on (token 0: none).
func (b *Backend) logHandOff(ctx context.Context, key string, token uint64) {
	if token != 0 {
		b.log.DebugContext(ctx, "handed on", "key", key, "token", token)
	}
}
