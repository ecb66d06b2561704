package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/backoff"
)

// retry runs fn until it succeeds, fails for good, or the attempts or the
// context's time run out. fn must be safe to repeat as a whole: every
// operation of this package is (an acquire repeated with the same attempt
// refreshes that attempt's row and keeps the token).
func (b *Backend) retry(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := b.inSlot(ctx, fn)
		if err == nil || !b.again(ctx, op, attempt, err) {
			return err
		}
	}
}

// again reports whether an operation whose attempt-th try failed with err is
// to be tried again, after waiting out the backoff: only transient faults,
// while attempts and the context's time remain.
func (b *Backend) again(ctx context.Context, op string, attempt int, err error) bool {
	if ctx.Err() != nil || !transient(err) || attempt >= b.attempts {
		return false
	}
	wait := b.backoff(attempt)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		// Sleeping would only end in the context's error; the fault is
		// more useful to the caller.
		return false
	}
	b.log.DebugContext(ctx, "leasehold postgres: retrying after transient error",
		"op", op, "attempt", attempt, "wait", wait, "err", err)
	t := time.NewTimer(wait)
	select {
	case <-ctx.Done():
		t.Stop()
		return false
	case <-t.C:
		return true
	}
}

// backoff is full-jitter exponential: uniform in [1ns, min(max, base*2^(n-1))]
// for attempt n >= 1. Full jitter: any pause will do before a transaction is
// tried again, and it spreads the retries of many clients the most.
func (b *Backend) backoff(attempt int) time.Duration {
	return backoff.Policy{Base: b.baseDelay, Cap: b.maxDelay, Jitter: backoff.FullJitter}.Delay(attempt - 1)
}

// transient reports failures that may pass if the whole operation is tried
// again: serialization failures, deadlocks, lock timeouts, connection
// problems and a server that is shutting down or starting up.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"55P03", // lock_not_available
			"57P01", // admin_shutdown (pg_terminate_backend, fast shutdown)
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now (starting up, recovering)
			"53300": // too_many_connections
			return true
		}
		return pgErr.Code[:2] == "08" // connection_exception class
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case pgconn.SafeToRetry(err),
		errors.As(err, &connectErr),
		errors.As(err, &netErr),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed): // a pooled conn whose server process ended
		return true
	}
	return false
}
