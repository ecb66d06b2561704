package sqlserver

import (
	"database/sql"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/roundtrip"
)

// Backend is the SQL Server lease store. It is safe for concurrent use.
type Backend struct {
	// Unsupported answers Batch, WatchReleases, WatchHandOffs and Shard:
	// one statement per call, no cheap notification, one shard.
	backend.Unsupported

	db      *sql.DB
	names   objectNames
	q       queries
	cfg     config
	log     *slog.Logger
	replica *sql.DB

	lastSweep atomic.Int64 // unix nanoseconds of the last acquire that swept

	// slots holds one token per call in flight (call), at most callBound.
	slots chan struct{}

	// trips runs every call's queries, so that the call ends with its
	// context (call); closing ends its idle I/O goroutines.
	trips     *roundtrip.Runner
	closing   chan struct{}
	closeOnce sync.Once
}

var _ backend.Backend = (*Backend)(nil)

// New returns a backend that keeps leases in the table of WithTable (default
// lease.Leases) of db. It does not create the table (see EnsureSchema and
// CreateScript) and does not touch the database. It runs at most as many
// calls at once as db's pool allows (db.SetMaxOpenConns, read here: set it
// before New), or DefaultMaxCalls when the pool is unlimited (WithMaxCalls). db (and a replica given with
// WithReplica) stay the caller's: Close does not close them.
func New(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, errors.New("sqlserver: New: nil *sql.DB")
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	names, err := newObjectNames(cfg.schema, cfg.table)
	if err != nil {
		return nil, err
	}
	closing := make(chan struct{})
	return &Backend{
		db:      db,
		names:   names,
		q:       newQueries(names, cfg.sweepBatch > 0),
		cfg:     cfg,
		log:     cfg.logger.With("backend", "sqlserver", "table", names.String()),
		replica: cfg.replica,
		slots:   make(chan struct{}, callBound(db.Stats().MaxOpenConnections, cfg.maxCalls)),
		trips:   roundtrip.New(closing),
		closing: closing,
	}, nil
}

// Info reports "sqlserver", shared across processes, with a waiter queue
// (backend/queue.go; without hand-off notices: see queue.go here), granting
// names with up to backend.MaxLimit holders (shared.go).
func (b *Backend) Info() backend.Info {
	return backend.Info{Name: "sqlserver", ProcessLocal: false, Queue: true, MaxLimit: backend.MaxLimit}
}

// Close ends the backend's idle I/O goroutines; a query abandoned by its
// caller still finishes in the background. The *sql.DB handles belong to
// the caller: Close leaves them open.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() { close(b.closing) })
	return nil
}

// ttlMicros converts a TTL to whole microseconds, rounding up so that the
// store's expiry is never earlier than asked. Sent as BIGINT, it cannot
// overflow for any TTL up to backend.MaxTTL.
func ttlMicros(ttl time.Duration) int64 {
	return int64((ttl + time.Microsecond - 1) / time.Microsecond)
}

// tokenParam converts a fencing token for a BIGINT parameter. Tokens come
// from a BIGINT sequence, so a token above MaxInt64 was never issued.
func tokenParam(token uint64) (int64, bool) {
	if token > math.MaxInt64 {
		return 0, false
	}
	return int64(token), true
}
