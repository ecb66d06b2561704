package postgres

import (
	"log/slog"
	"time"
)

// Option configures a Backend built by New.
type Option func(*config)

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
	DefaultSchema     = "lease"
	DefaultTable      = "leases"
	DefaultSweepEvery = time.Second
	DefaultSweepBatch = 100
	DefaultAttempts   = 8
	DefaultBaseDelay  = 5 * time.Millisecond
	DefaultMaxDelay   = 500 * time.Millisecond
)

func defaultConfig() config {
	return config{
		schema:     DefaultSchema,
		table:      DefaultTable,
		logger:     slog.New(slog.DiscardHandler),
		sweepEvery: DefaultSweepEvery,
		sweepBatch: DefaultSweepBatch,
		attempts:   DefaultAttempts,
		baseDelay:  DefaultBaseDelay,
		maxDelay:   DefaultMaxDelay,
	}
}

// WithTable sets the schema and table of the lease rows. Default:
// lease.leases (DefaultSchema, DefaultTable). The names are validated by New
// (see ValidateIdentifier) and always quoted. The sequence of fencing tokens
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

// WithSweep sets how often an Acquire first deletes up to batch expired rows
// of other names, as its own statement (the table stays small without a
// background job). Default: at most once per second, 100 rows. every 0 sweeps
// before every Acquire; every < 0 or batch <= 0 disables the sweep.
func WithSweep(every time.Duration, batch int) Option {
	return func(c *config) { c.sweepEvery, c.sweepBatch = every, batch }
}

// WithRetry sets how transient failures (serialization failures, deadlocks,
// dropped or refused connections, server shutting down) are retried: up to
// attempts tries in all, with full-jitter exponential backoff from base,
// capped at max, and never past the context's deadline. Default: 8 attempts,
// 5ms, 500ms. attempts 1 disables retries.
func WithRetry(attempts int, base, max time.Duration) Option {
	return func(c *config) { c.attempts, c.baseDelay, c.maxDelay = attempts, base, max }
}
