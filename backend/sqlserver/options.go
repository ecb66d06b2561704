package sqlserver

import (
	"database/sql"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the options below.
const (
	DefaultSchema              = "lease"
	DefaultTable               = "Leases"
	DefaultSweepBatchSize      = 100
	DefaultReplicaTimeout      = 5 * time.Second
	DefaultReplicaPollInterval = 50 * time.Millisecond
	DefaultRetryAttempts       = 5
	DefaultRetryBaseDelay      = 20 * time.Millisecond
	DefaultRetryMaxDelay       = time.Second
)

const (
	// maxSweepBatchSize bounds one sweep, so that an acquire never deletes
	// an unbounded number of rows before it runs.
	maxSweepBatchSize = 100_000
	// cleanupReleaseTimeout bounds the release of a grant that the caller
	// will not get (replica not confirmed), which runs even after ctx ended.
	cleanupReleaseTimeout = 5 * time.Second
)

// Option configures a Backend.
type Option func(*config) error

type config struct {
	schema, table  string
	replica        *sql.DB
	replicaTimeout time.Duration
	replicaPoll    time.Duration
	sweep          int
	retry          retryPolicy
	logger         *slog.Logger
}

func defaultConfig() config {
	return config{
		schema:         DefaultSchema,
		table:          DefaultTable,
		replicaTimeout: DefaultReplicaTimeout,
		replicaPoll:    DefaultReplicaPollInterval,
		sweep:          DefaultSweepBatchSize,
		retry: retryPolicy{
			attempts: DefaultRetryAttempts,
			base:     DefaultRetryBaseDelay,
			max:      DefaultRetryMaxDelay,
		},
		logger: slog.New(slog.DiscardHandler),
	}
}

// WithTable sets the schema and table of the lease rows. Default: lease.Leases.
// The names are checked with CheckIdentifiers and always bracket-quoted.
func WithTable(schema, table string) Option {
	return func(c *config) error {
		if err := CheckIdentifiers(schema, table); err != nil {
			return err
		}
		c.schema, c.table = schema, table
		return nil
	}
}

// WithReplica turns on read-replica confirmation: after every grant the
// backend polls replica (a readable secondary of an Availability Group or a
// geo-replica) until it shows the row's RowVersion; a grant that is not
// confirmed within the replica timeout is released on the primary and
// reported as not acquired. Default: no replica, no confirmation. The backend
// does not close replica.
func WithReplica(replica *sql.DB) Option {
	return func(c *config) error {
		if replica == nil {
			return fmt.Errorf("sqlserver: WithReplica: nil *sql.DB")
		}
		c.replica = replica
		return nil
	}
}

// WithReplicaTimeout bounds how long one grant waits for the replica to show
// it. Default: DefaultReplicaTimeout (5s). It must be positive; the caller's
// context deadline still applies.
func WithReplicaTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("sqlserver: WithReplicaTimeout: %v is not positive", d)
		}
		c.replicaTimeout = d
		return nil
	}
}

// WithReplicaPollInterval sets the pause between two reads of the replica.
// Default: DefaultReplicaPollInterval (50ms). It must be positive.
func WithReplicaPollInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("sqlserver: WithReplicaPollInterval: %v is not positive", d)
		}
		c.replicaPoll = d
		return nil
	}
}

// WithSweepBatchSize sets how many expired rows (of any name) one acquire
// deletes before it runs, so that abandoned leases do not pile up without a
// background job. 0 turns the sweep off. Default: DefaultSweepBatchSize (100);
// at most 100000.
func WithSweepBatchSize(n int) Option {
	return func(c *config) error {
		if n < 0 || n > maxSweepBatchSize {
			return fmt.Errorf("sqlserver: WithSweepBatchSize: %d is outside [0, %d]", n, maxSweepBatchSize)
		}
		c.sweep = n
		return nil
	}
}

// WithRetry sets how transient errors (deadlock victim, Azure SQL throttling
// and failover) are retried: at most attempts runs of the whole batch, with a
// jittered exponential pause starting near base and capped at max, and never
// past the context's deadline. attempts 1 turns retries off. Defaults:
// DefaultRetryAttempts (5), DefaultRetryBaseDelay (20ms), DefaultRetryMaxDelay
// (1s).
func WithRetry(attempts int, base, max time.Duration) Option {
	return func(c *config) error {
		if attempts < 1 || base <= 0 || max < base {
			return fmt.Errorf("sqlserver: WithRetry(%d, %v, %v): need attempts >= 1 and 0 < base <= max", attempts, base, max)
		}
		c.retry = retryPolicy{attempts: attempts, base: base, max: max}
		return nil
	}
}

// WithLogger sets where the backend logs acquisition faults, retries, replica
// confirmation outcomes and release faults. Default: nothing is logged. Keys
// and owners are logged; connection strings never are (the backend never sees
// them).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("sqlserver: WithLogger: nil logger")
		}
		c.logger = l
		return nil
	}
}
