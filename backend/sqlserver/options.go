package sqlserver

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the options below.
const (
	DefaultSchema              = "lease"
	DefaultTable               = "Leases"
	DefaultSweepEvery          = time.Duration(0) // every acquire: the sweep rides in its round trip
	DefaultSweepBatch          = 100
	DefaultReplicaTimeout      = 5 * time.Second
	DefaultReplicaPollInterval = 50 * time.Millisecond
	DefaultRetryAttempts       = 5
	DefaultRetryBaseDelay      = 20 * time.Millisecond
	DefaultRetryMaxDelay       = time.Second
	// DefaultMaxCalls bounds the calls in flight on a *sql.DB whose pool is
	// unlimited (WithMaxCalls).
	DefaultMaxCalls = 32
)

const (
	// MaxSweepBatch bounds one sweep's DELETE per table below the 5,000
	// locks on one table or index at which SQL Server escalates a
	// statement's row locks to a table lock, which would stall every other
	// call on the lease table until the sweep commits.
	MaxSweepBatch = 4_000
	// cleanupReleaseTimeout bounds the release of a grant that the caller
	// will not get (replica not confirmed), which runs even after ctx ended.
	cleanupReleaseTimeout = 5 * time.Second
)

// Option configures a Backend built by New. Options cannot fail: New checks
// the configuration they make and reports what is wrong (errors wrap
// ErrInvalidOption, or ErrInvalidIdentifier for the table's names).
type Option func(*config)

// ErrInvalidOption is returned (wrapped) by New for an option value it cannot
// use.
var ErrInvalidOption = errors.New("sqlserver: invalid option")

type config struct {
	schema, table  string
	replica        *sql.DB
	replicaSet     bool // WithReplica was given (a nil replica is an error)
	replicaTimeout time.Duration
	replicaPoll    time.Duration
	sweepEvery     time.Duration
	sweepBatch     int
	retry          retryPolicy
	maxCalls       int // 0: DefaultMaxCalls
	maxCallsSet    bool
	logger         *slog.Logger
}

func defaultConfig() config {
	return config{
		schema:         DefaultSchema,
		table:          DefaultTable,
		replicaTimeout: DefaultReplicaTimeout,
		replicaPoll:    DefaultReplicaPollInterval,
		sweepEvery:     DefaultSweepEvery,
		sweepBatch:     DefaultSweepBatch,
		retry: retryPolicy{
			attempts: DefaultRetryAttempts,
			base:     DefaultRetryBaseDelay,
			max:      DefaultRetryMaxDelay,
		},
		logger: slog.New(slog.DiscardHandler),
	}
}

// WithTable sets the schema and table of the lease rows. Default:
// lease.Leases (DefaultSchema, DefaultTable). New checks the names with
// ValidateTable; they are always bracket-quoted.
func WithTable(schema, table string) Option {
	return func(c *config) { c.schema, c.table = schema, table }
}

// WithReplica turns on read-replica confirmation: after every grant the
// backend polls replica (a readable secondary of an Availability Group or a
// geo-replica) until it shows the row's RowVersion; a grant that is not
// confirmed within the replica timeout is released on the primary and
// reported as not acquired. Default: no replica, no confirmation. New refuses
// a nil replica. The backend does not close replica.
func WithReplica(replica *sql.DB) Option {
	return func(c *config) { c.replica, c.replicaSet = replica, true }
}

// WithReplicaTimeout bounds how long one grant waits for the replica to show
// it. Default: DefaultReplicaTimeout (5s). New refuses a duration that is not
// positive; the caller's context deadline still applies.
func WithReplicaTimeout(d time.Duration) Option {
	return func(c *config) { c.replicaTimeout = d }
}

// WithReplicaPollInterval sets the pause between two reads of the replica.
// Default: DefaultReplicaPollInterval (50ms). New refuses a duration that is
// not positive.
func WithReplicaPollInterval(d time.Duration) Option {
	return func(c *config) { c.replicaPoll = d }
}

// WithSweep makes an Acquire first delete up to batch expired rows of other
// names, at most once per every (0: in every Acquire), so that abandoned
// leases do not pile up without a background job. Here the sweep is a
// statement of the acquire's own batch (no extra round trip), hence the
// default interval 0. batch 0 turns the sweep off; New refuses a negative
// every, a negative batch or one above MaxSweepBatch (4,000, below SQL
// Server's lock escalation threshold). Default:
// DefaultSweepEvery (0), DefaultSweepBatch (100).
func WithSweep(every time.Duration, batch int) Option {
	return func(c *config) { c.sweepEvery, c.sweepBatch = every, batch }
}

// WithRetry sets how transient errors (deadlock victim, Azure SQL throttling
// and failover) are retried: at most attempts runs of the whole batch, with a
// jittered exponential pause starting near base and capped at max, and never
// past the context's deadline. attempts 1 turns retries off; New refuses
// attempts < 1 or delays outside 0 < base <= max. Defaults:
// DefaultRetryAttempts (5), DefaultRetryBaseDelay (20ms), DefaultRetryMaxDelay
// (1s).
func WithRetry(attempts int, base, max time.Duration) Option {
	return func(c *config) { c.retry = retryPolicy{attempts: attempts, base: base, max: max} }
}

// WithMaxCalls bounds how many calls the backend runs at once: each call in
// flight holds a connection of the *sql.DB, and SQL Server refuses
// connections beyond its own limit. Further calls wait for a free slot
// within their context. The bound is never above the pool's
// MaxOpenConnections (db.SetMaxOpenConns, read by New) when that is set.
// Default: DefaultMaxCalls (32) for an unlimited pool, else the pool's
// limit. New refuses n < 1.
func WithMaxCalls(n int) Option {
	return func(c *config) { c.maxCalls, c.maxCallsSet = n, true }
}

// WithLogger sets where the backend logs acquisition faults, retries, replica
// confirmation outcomes and release faults. Default: nothing is logged; nil
// keeps the default. Keys and owners are logged; connection strings never are
// (the backend never sees them).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// validate reports the first option value New cannot use.
func (c *config) validate() error {
	if err := ValidateTable(c.schema, c.table); err != nil {
		return err
	}
	switch {
	case c.replicaSet && c.replica == nil:
		return fmt.Errorf("%w: WithReplica(nil)", ErrInvalidOption)
	case c.replicaTimeout <= 0:
		return fmt.Errorf("%w: WithReplicaTimeout(%v): not positive", ErrInvalidOption, c.replicaTimeout)
	case c.replicaPoll <= 0:
		return fmt.Errorf("%w: WithReplicaPollInterval(%v): not positive", ErrInvalidOption, c.replicaPoll)
	case c.sweepBatch > MaxSweepBatch:
		return fmt.Errorf("%w: WithSweep(%v, %d): batch above MaxSweepBatch (%d): a DELETE of that many rows would escalate to a table lock", ErrInvalidOption, c.sweepEvery, c.sweepBatch, MaxSweepBatch)
	case c.sweepEvery < 0 || c.sweepBatch < 0:
		return fmt.Errorf("%w: WithSweep(%v, %d): need every >= 0 and batch within [0, %d]", ErrInvalidOption, c.sweepEvery, c.sweepBatch, MaxSweepBatch)
	case c.maxCallsSet && c.maxCalls < 1:
		return fmt.Errorf("%w: WithMaxCalls(%d): need at least 1", ErrInvalidOption, c.maxCalls)
	case c.retry.attempts < 1 || c.retry.base <= 0 || c.retry.max < c.retry.base:
		return fmt.Errorf("%w: WithRetry(%d, %v, %v): need attempts >= 1 and 0 < base <= max", ErrInvalidOption, c.retry.attempts, c.retry.base, c.retry.max)
	}
	return nil
}
