package postgres

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/backend"
	"golang.org/x/sync/semaphore"
)

// Backend is the PostgreSQL lease store. It is safe for concurrent use. It
// keeps the waiter queue, batches, announces releases and sends hand-off
// notices (see Info); it has one shard (the embedded Unsupported's Shard).
type Backend struct {
	backend.Unsupported

	pool       *pgxpool.Pool
	names      names
	lockSpace  string // prefix of every advisory lock key: schema NUL table NUL
	channel    string // NOTIFY channel of this table
	log        *slog.Logger
	sweepEvery time.Duration
	sweepBatch int
	attempts   int
	baseDelay  time.Duration
	maxDelay   time.Duration

	q        queries
	listPage int // holdings per List statement (tests make it small)

	slots *semaphore.Weighted // store calls in flight: newCallSlots

	lastSweep atomic.Int64 // unix nanoseconds of the last sweep start
	sweeping  atomic.Bool

	// onListen, when set (by tests), is called each time a LISTEN succeeds.
	onListen func()
	// revokeHook, when set (by tests), is called before a revoke sends its
	// COMMIT ("commit") and before it settles a COMMIT whose answer was lost
	// ("settle").
	revokeHook func(stage string)
	// watchIdle is how long a watch waits for a notification before it
	// pings its connection, and how long the ping may take (defaultWatchIdle;
	// tests shorten it).
	watchIdle time.Duration
}

// defaultWatchIdle is how long a LISTEN connection may stay quiet before the
// watch pings it, and how long the ping may take before the watch gives the
// connection up and reconnects: a silently dead link is noticed within 30 s,
// as on Redis.
const defaultWatchIdle = 15 * time.Second

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend that keeps its leases in the table chosen by the
// options (default lease.leases), using pool for every statement. The table
// must exist: call EnsureSchema first, or run CreateScript's DDL. New does no
// I/O. The pool stays the caller's: Close does not close it. The Backend
// has at most the pool's MaxConns store calls in flight; the others wait, in
// order, with their caller's context (a watch takes a connection of its own
// out of the pool).
func New(pool *pgxpool.Pool, opts ...Option) (*Backend, error) {
	if pool == nil {
		return nil, errors.New("postgres: nil pool")
	}
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	n := newNames(c.schema, c.table)
	b := &Backend{
		pool:       pool,
		names:      n,
		lockSpace:  c.schema + "\x00" + c.table + "\x00",
		channel:    channelName(c.schema, c.table),
		log:        c.logger,
		sweepEvery: c.sweepEvery,
		sweepBatch: c.sweepBatch,
		attempts:   c.attempts,
		baseDelay:  c.baseDelay,
		maxDelay:   c.maxDelay,
		q:          buildQueries(n),
		listPage:   defaultListPage,
		watchIdle:  defaultWatchIdle,
		slots:      newCallSlots(pool.Config().MaxConns),
	}
	return b, nil
}

// Info reports Name "postgres", Queue, Batches, AnnouncesReleases and
// HandOffNotices: leases are shared by every process that uses the same
// table, the store keeps the waiter queue and hands a released name to its
// head (backend/queue.go), a batch is one round trip, and releases and
// hand-offs are announced with NOTIFY.
func (b *Backend) Info() backend.Info {
	return backend.Info{Name: "postgres", Queue: true, Batches: true, AnnouncesReleases: true, HandOffNotices: true,
		MaxLimit: backend.MaxLimit}
}

// Close does nothing: the pool belongs to the caller, and watches end with
// their context. It exists to satisfy backend.Backend and returns nil.
func (b *Backend) Close() error { return nil }

// Channel returns the NOTIFY channel on which releases of this table are
// announced (the payload is the lease name).
func (b *Backend) Channel() string { return b.channel }

// channelName derives a short, always-valid channel name from the table, so
// that tables never hear each other's releases and no name is too long.
func channelName(schema, table string) string {
	h := fnv.New64a()
	h.Write([]byte(schema + "\x00" + table))
	return fmt.Sprintf("leasehold_%016x", h.Sum64())
}

// handOffChannel is the NOTIFY channel of the hand-offs to addr (a
// QueueRequest.Notify address) on this table: "leasehold_h_" and 16 hex
// digits of the FNV-1a hash of schema, table and address. Always a valid,
// short identifier (an address may be 64 bytes, a channel 63), and the
// tables never hear each other's hand-offs. Two addresses may share a
// channel; the payload names its address, and WatchHandOffs drops the
// others'.
func (b *Backend) handOffChannel(addr string) string {
	h := fnv.New64a()
	h.Write([]byte(b.lockSpace))
	h.Write([]byte(addr))
	return fmt.Sprintf("leasehold_h_%016x", h.Sum64())
}

// lockKey maps a lease name to the advisory lock taken while granting it. Two
// names may share a key; that only serialises their grants. The hash is
// computed here (FNV-1a), not by the server, so every version of this package
// and of PostgreSQL agrees on it.
func (b *Backend) lockKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(b.lockSpace))
	h.Write([]byte(key))
	return int64(h.Sum64()) // two's complement reinterpretation, by design
}
