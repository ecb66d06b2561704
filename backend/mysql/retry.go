package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/internal/backoff"
)

// transientErrors are the server error numbers after which running the same
// transaction again can succeed: 1213 (deadlock: InnoDB rolled the whole
// transaction back), 1205 (lock wait timeout: the backend rolls back itself),
// 1927 (MariaDB: connection killed) and 2013 (lost connection during query).
var transientErrors = []uint16{1213, 1205, 1927, 2013}

// isTransient reports whether err is worth running the whole transaction
// again. Every transaction of this package is idempotent for its attempt
// (an acquire repeated after a lost answer refreshes the same holding and
// keeps its token; renew and release name the holding), so an ambiguous
// failure can be retried safely.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		for _, n := range transientErrors {
			if me.Number == n {
				return true
			}
		}
		return false
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, mysqldrv.ErrInvalidConn) ||
		errors.As(err, &ne) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// isRolledBack reports whether err says for certain that the call changed
// nothing: the server answered a transient error, which the procedure's
// handler met by rolling its transaction back (a deadlock or a lock wait
// timeout), or the driver found the connection broken before it sent the
// call. A connection lost during a CALL leaves its outcome unknown.
func isRolledBack(err error) bool {
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	return errors.Is(err, driver.ErrBadConn)
}

// retryPolicy is a capped exponential backoff with jitter.
type retryPolicy struct {
	attempts  int
	base, max time.Duration
}

// delay returns the pause before retry number n (1 for the first retry).
func (p retryPolicy) delay(n int) time.Duration {
	return backoff.Policy{Base: p.base, Cap: p.max, Jitter: backoff.HalfJitter}.Delay(n - 1)
}

// retry runs fn (through call, on names) until it succeeds, fails with a
// non-transient error, has run p.attempts times, or the next pause would end
// after ctx's deadline. An error of ctx itself is never retried.
func (b *Backend) retry(ctx context.Context, op string, names []string, fn func(context.Context) error) error {
	return b.retryWhen(ctx, op, names, isTransient, fn)
}

// retryWhen is retry with retryable in place of isTransient, for calls that
// may be run again only after some errors (Revoke).
func (b *Backend) retryWhen(ctx context.Context, op string, names []string, retryable func(error) bool, fn func(context.Context) error) error {
	p := b.cfg.retry
	for attempt := 1; ; attempt++ {
		err := b.call(ctx, names, fn)
		if err == nil {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if errors.Is(err, ctxErr) {
				return err
			}
			return fmt.Errorf("%w (%v)", ctxErr, err)
		}
		if !retryable(err) || attempt >= p.attempts {
			return err
		}
		pause := p.delay(attempt)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= pause {
			return err
		}
		b.log.DebugContext(ctx, "retrying after a transient error", "op", op, "attempt", attempt, "pause", pause, "err", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
