package mysql

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the options below.
const (
	DefaultSchema         = "leasehold"
	DefaultTable          = "leases"
	DefaultRetryAttempts  = 5
	DefaultRetryBaseDelay = 20 * time.Millisecond
	DefaultRetryMaxDelay  = time.Second
	// DefaultMaxCalls bounds the calls in flight on a *sql.DB whose pool is
	// unlimited (WithMaxCalls).
	DefaultMaxCalls = 32
	// DefaultSweepEvery and DefaultSweepBatch are WithSweep's defaults.
	DefaultSweepEvery = time.Second
	DefaultSweepBatch = 20
)

// Option configures a Backend built by New. Options cannot fail: New checks
// the configuration they make and reports what is wrong (errors wrap
// ErrInvalidOption, or ErrInvalidIdentifier for the table's names).
type Option func(*config)

// ErrInvalidOption is returned (wrapped) by New for an option value it cannot
// use.
var ErrInvalidOption = errors.New("mysql: invalid option")

type config struct {
	schema, table string
	retry         retryPolicy
	maxCalls      int // 0: DefaultMaxCalls
	maxCallsSet   bool
	sweepEvery    time.Duration
	sweepBatch    int
	logger        *slog.Logger
}

func defaultConfig() config {
	return config{
		schema: DefaultSchema,
		table:  DefaultTable,
		retry: retryPolicy{
			attempts: DefaultRetryAttempts,
			base:     DefaultRetryBaseDelay,
			max:      DefaultRetryMaxDelay,
		},
		logger:     slog.New(slog.DiscardHandler),
		sweepEvery: DefaultSweepEvery,
		sweepBatch: DefaultSweepBatch,
	}
}

// WithTable sets the database (MySQL's schema) and the table of the lease
// rows; the queue and holdings tables are named after the table. Default:
// leasehold.leases (DefaultSchema, DefaultTable). New checks the names with
// ValidateTable.
func WithTable(schema, table string) Option {
	return func(c *config) { c.schema, c.table = schema, table }
}

// WithRetry sets how transient errors (deadlock 1213, lock wait timeout
// 1205, a lost connection) are retried: at most attempts runs of the whole
// transaction, with a jittered exponential pause starting near base and
// capped at max, and never past the context's deadline. attempts 1 turns
// retries off; New refuses attempts < 1 or delays outside 0 < base <= max.
// Defaults: DefaultRetryAttempts (5), DefaultRetryBaseDelay (20ms),
// DefaultRetryMaxDelay (1s).
func WithRetry(attempts int, base, max time.Duration) Option {
	return func(c *config) { c.retry = retryPolicy{attempts: attempts, base: base, max: max} }
}

// WithMaxCalls bounds how many calls the backend runs at once: each call in
// flight holds a connection of the *sql.DB, and the server refuses
// connections beyond max_connections. Further calls wait for a free slot
// within their context. The bound is never above the pool's
// MaxOpenConnections (db.SetMaxOpenConns, read by New) when that is set.
// Default: DefaultMaxCalls (32) for an unlimited pool, else the pool's
// limit. New refuses n < 1.
func WithMaxCalls(n int) Option {
	return func(c *config) { c.maxCalls, c.maxCallsSet = n, true }
}

// WithSweep makes an Acquire first clear up to batch abandoned names: names
// with an expired holding or an expired queue entry, whose expired rows
// (and the name's lock row, once nothing is left) are deleted, one name per
// transaction under the name's lock, as a call on the name would. It runs
// at most once per every (0: before every Acquire) and by one caller at a
// time, so that the tables stay bounded by the names in use without a
// background job. batch 0 turns the sweep off; New refuses a negative every
// or batch. Default: DefaultSweepEvery (1s), DefaultSweepBatch (20).
func WithSweep(every time.Duration, batch int) Option {
	return func(c *config) { c.sweepEvery, c.sweepBatch = every, batch }
}

// WithLogger sets where the backend logs retries and durability warnings.
// Default: nothing is logged; nil keeps the default.
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
	case c.maxCallsSet && c.maxCalls < 1:
		return fmt.Errorf("%w: WithMaxCalls(%d): need at least 1", ErrInvalidOption, c.maxCalls)
	case c.sweepEvery < 0 || c.sweepBatch < 0:
		return fmt.Errorf("%w: WithSweep(%v, %d): need every >= 0 and batch >= 0", ErrInvalidOption, c.sweepEvery, c.sweepBatch)
	case c.retry.attempts < 1 || c.retry.base <= 0 || c.retry.max < c.retry.base:
		return fmt.Errorf("%w: WithRetry(%d, %v, %v): need attempts >= 1 and 0 < base <= max", ErrInvalidOption, c.retry.attempts, c.retry.base, c.retry.max)
	}
	return nil
}
