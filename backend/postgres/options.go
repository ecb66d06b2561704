package postgres

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Option configures a Backend built by New. Options cannot fail: New checks
// the configuration they make and reports what is wrong (errors wrap
// ErrInvalidOption, or ErrInvalidIdentifier for the table's names).
type Option func(*config)

// ErrInvalidOption is returned (wrapped) by New for an option value it cannot
// use.
var ErrInvalidOption = errors.New("postgres: invalid option")

type config struct {
	schema     string
	table      string
	logger     *slog.Logger
	sweepEvery time.Duration
	sweepBatch int
	attempts   int
	baseDelay  time.Duration
	maxDelay   time.Duration
}

// Defaults of the options below.
const (
	DefaultSchema         = "lease"
	DefaultTable          = "leases"
	DefaultSweepEvery     = time.Second
	DefaultSweepBatch     = 100
	DefaultRetryAttempts  = 8
	DefaultRetryBaseDelay = 5 * time.Millisecond
	DefaultRetryMaxDelay  = 500 * time.Millisecond
)

func defaultConfig() config {
	return config{
		schema:     DefaultSchema,
		table:      DefaultTable,
		logger:     slog.New(slog.DiscardHandler),
		sweepEvery: DefaultSweepEvery,
		sweepBatch: DefaultSweepBatch,
		attempts:   DefaultRetryAttempts,
		baseDelay:  DefaultRetryBaseDelay,
		maxDelay:   DefaultRetryMaxDelay,
	}
}

// WithTable sets the schema and table of the lease rows. Default:
// lease.leases (DefaultSchema, DefaultTable). New checks the names with
// ValidateTable; they are always quoted. The sequence of fencing tokens
// lives in the same schema, named after the table (table + "_token_seq").
func WithTable(schema, table string) Option {
	return func(c *config) { c.schema, c.table = schema, table }
}

// WithLogger sets the logger for retries, sweeps and LISTEN reconnects.
// Default: nothing is logged. Nil keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithSweep makes an Acquire first delete up to batch expired rows of other
// names, and up to batch expired waiter queue entries, at most once per every
// (0: before every Acquire), so that the tables stay small without a
// background job. Here the sweep is a statement of its
// own (a round trip), hence the interval. batch 0 turns the sweep off; New
// refuses a negative every or batch. Default: DefaultSweepEvery (1s),
// DefaultSweepBatch (100).
func WithSweep(every time.Duration, batch int) Option {
	return func(c *config) { c.sweepEvery, c.sweepBatch = every, batch }
}

// WithRetry sets how transient failures (serialization failures, deadlocks,
// dropped or refused connections, server shutting down) are retried: up to
// attempts tries in all, with full-jitter exponential backoff from base,
// capped at max, and never past the context's deadline. attempts 1 turns
// retries off; New refuses attempts < 1 or delays outside 0 < base <= max.
// Default: DefaultRetryAttempts (8), DefaultRetryBaseDelay (5ms),
// DefaultRetryMaxDelay (500ms).
func WithRetry(attempts int, base, max time.Duration) Option {
	return func(c *config) { c.attempts, c.baseDelay, c.maxDelay = attempts, base, max }
}

// validate reports the first option value New cannot use.
func (c *config) validate() error {
	if err := ValidateTable(c.schema, c.table); err != nil {
		return err
	}
	switch {
	case c.sweepEvery < 0 || c.sweepBatch < 0:
		return fmt.Errorf("%w: WithSweep(%v, %d): negative", ErrInvalidOption, c.sweepEvery, c.sweepBatch)
	case c.attempts < 1 || c.baseDelay <= 0 || c.maxDelay < c.baseDelay:
		return fmt.Errorf("%w: WithRetry(%d, %v, %v): need attempts >= 1 and 0 < base <= max", ErrInvalidOption, c.attempts, c.baseDelay, c.maxDelay)
	}
	return nil
}
