package sqlserver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/internal/backoff"
)

// transientErrors are the SQL Server error numbers after which running the
// same batch again can succeed: 1205 (chosen as deadlock victim) and the
// numbers Microsoft documents as transient for Azure SQL (service busy,
// database moving or failing over, resource limits, in-memory OLTP
// conflicts), and the errors of an availability group whose replica is
// changing role (976, 978, 983), which Microsoft documents as clearing once
// the role change completes. They arrive as mssql.Error, sent by the server. The client-side
// numbers of SqlClient (10053, 10054, 121, 64, 233 for a dropped connection)
// are not here: go-mssqldb never produces them; it reports a dropped
// connection with the values isDropped recognises.
var transientErrors = []int32{
	1205,  // deadlock victim
	976,   // availability group database not accessible (role change in progress)
	978,   // availability group replica not readable for this intent (role change)
	983,   // availability group database not accessible (role not yet resolved)
	4060,  // cannot open database (failover in progress)
	4221,  // login to read-secondary failed while it switches to versioning
	10928, // resource ID limit reached
	10929, // resource ID minimum guarantee not available
	10936, // request limit for the elastic pool reached
	40143, // service encountered an error processing the request
	40197, // service error processing the request (reconfiguration, failover)
	40501, // the service is currently busy
	40540, // service encountered an error processing the request
	40613, // database is not currently available
	41301, // dependency failure in in-memory OLTP commit
	41302, // in-memory OLTP update conflict
	41305, // in-memory OLTP repeatable-read validation failure
	41325, // in-memory OLTP serializable validation failure
	41839, // in-memory OLTP transaction exceeded the commit dependencies
	49918, // not enough resources to process the request
	49919, // too many create or update operations in progress
	49920, // too many operations in progress
}

// isTransient reports whether err is worth running the whole batch again.
// Every batch of this package is idempotent for its attempt (an acquire
// repeated after a lost answer refreshes the same holding and keeps its
// token; renew and release name the holding), so an ambiguous failure, where
// the batch may or may not have committed, can be retried safely.
func isTransient(err error) bool {
	return isDropped(err) || hasErrorNumber(err, transientErrors...)
}

// isDropped reports whether err is how go-mssqldb (v1.11) reports a connection
// that broke before or during a batch:
//   - driver.ErrBadConn, also inside mssql.RetryableError, when the connection
//     was already known to be bad or broke while the request was sent;
//   - mssql.StreamError, when reading the response failed half-way (its inner
//     error, io.EOF or a *net.OpError such as "connection reset by peer", is
//     not unwrapped by the driver);
//   - mssql.ServerError, a fatal server error (severity 20 and above) that
//     ended the session;
//   - net.Error (a *net.OpError: the driver turns every failed first read of
//     the response into one), io.EOF and io.ErrUnexpectedEOF otherwise.
//
// A net.Error may also be a dial or read timeout: the batch is retried then
// as well, within the caller's deadline (retry never retries ctx's own end).
func isDropped(err error) bool {
	// context.DeadlineExceeded is a net.Error too (it has Timeout), but the
	// end of a context is the caller's decision, never a dropped connection.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var (
		se  mssql.StreamError
		sve mssql.ServerError
		ne  net.Error
	)
	return errors.Is(err, driver.ErrBadConn) ||
		errors.As(err, &se) ||
		errors.As(err, &sve) ||
		errors.As(err, &ne) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// withServerCause adds the server's own message to a mssql.ServerError,
// whose text is only "SQL Server had internal error"; the result still wraps
// err.
func withServerCause(err error) error {
	var sve mssql.ServerError
	if errors.As(err, &sve) {
		if cause := sve.Unwrap(); cause != nil {
			return fmt.Errorf("%w: %v", err, cause)
		}
	}
	return err
}

// retryPolicy is a capped exponential backoff with jitter.
type retryPolicy struct {
	attempts  int
	base, max time.Duration
}

// delay returns the pause before retry number n (1 for the first retry): a
// random duration in [d/2, d) where d = min(max, base*2^(n-1)). Jitter keeps
// the sessions of one deadlock from colliding again; half jitter keeps at
// least half the pause, so that the other session has time to finish.
func (p retryPolicy) delay(n int) time.Duration {
	return backoff.Policy{Base: p.base, Cap: p.max, Jitter: backoff.HalfJitter}.Delay(n - 1)
}

// isRolledBack reports whether err says for certain that the batch changed
// nothing: a deadlock victim's transaction (1205) is rolled back whole, and
// every writing batch of this package runs in one transaction under
// XACT_ABORT.
func isRolledBack(err error) bool { return hasErrorNumber(err, 1205) }

// retry runs fn (through call, on names) until it succeeds, fails with a non-transient error, has run
// p.attempts times, or the next pause would end after ctx's deadline. An
// error of ctx itself is never retried: when ctx has ended, the returned
// error wraps ctx.Err().
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
			return withServerCause(err)
		}
		pause := p.delay(attempt)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= pause {
			return withServerCause(err)
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
