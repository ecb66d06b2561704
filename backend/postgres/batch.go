package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leasehold/leasehold/backend"
)

var _ backend.Batcher = (*Backend)(nil)

// Batch makes every call in calls in one round trip (a pgx.Batch: one
// pipeline on one pooled connection) and fills in each call's Grant and Err as
// Acquire, Renew or Release would have answered it, with the same statements.
//
// Each call is its own transaction (BEGIN ... COMMIT, with synchronous commit
// set inside it, as the single calls do): a batch is not a transaction, and
// one call's failure never undoes another's. Calls run in slice order on one
// connection, so calls on the same key keep their order. A call that breaks
// the request limits gets an error wrapping backend.ErrInvalidRequest and is
// not sent.
//
// PostgreSQL skips the rest of a pipeline after an error (up to its single
// Sync), and the calls before the failed one have committed by then. So when
// the server refuses call i, calls before i keep their answers and the calls
// after i, which never ran, are sent again. A transient fault (see WithRetry)
// is retried with the single calls' backoff, the batch's tries counted
// together; a retry re-sends only calls without an answer, the failed one
// included (safe: an acquire retried with the same Attempt refreshes its own
// holding, a release or renew repeated is harmless). When the faults outlast
// the retries, a fault the server reported is that call's answer (the next
// calls are sent again), and a failed round trip (the connection, the
// context) is the answer of every call still without one: each may have been
// applied.
func (b *Backend) Batch(ctx context.Context, calls []backend.Call) {
	pending := make([]int, 0, len(calls)) // indexes of the calls to send, in order
	acquires := false
	for i := range calls {
		c := &calls[i]
		c.Grant, c.Err = backend.Grant{}, nil
		if b.answerLocally(c) {
			continue
		}
		pending = append(pending, i)
		acquires = acquires || c.Op == backend.OpAcquire
	}
	if acquires {
		b.maybeSweep(ctx)
	}
	for tries := 1; len(pending) > 0; {
		answered, err := b.batchOnce(ctx, calls, pending)
		pending = pending[answered:]
		if err == nil {
			return
		}
		if b.again(ctx, "batch", tries, err) {
			tries++
			continue
		}
		if ctx.Err() != nil || !refusedByServer(err) {
			for _, i := range pending {
				calls[i].Err = callError(&calls[i], err)
			}
			return
		}
		calls[pending[0]].Err = callError(&calls[pending[0]], err)
		pending = pending[1:]
	}
}

// answerLocally answers the calls that the single calls answer without a
// round trip: an invalid request, a token no holding can have, an unknown Op.
func (b *Backend) answerLocally(c *backend.Call) bool {
	switch c.Op {
	case backend.OpAcquire:
		c.Err = c.Acquire.Validate()
		return c.Err != nil
	case backend.OpRenew:
		if c.Err = c.Renew.Validate(); c.Err != nil {
			return true
		}
		if c.Renew.Token > math.MaxInt64 {
			c.Err = fmt.Errorf("postgres: renew %q: %w", c.Renew.Key, backend.ErrNotHeld)
			return true
		}
		return false
	case backend.OpRelease:
		if c.Err = c.Release.Validate(); c.Err != nil {
			return true
		}
		return c.Release.Token > math.MaxInt64 // no holding can have it: nothing to do
	}
	c.Err = fmt.Errorf("postgres: batch: %w: unknown %v", backend.ErrInvalidRequest, c.Op)
	return true
}

// callError wraps err as the single call would have returned it.
func callError(c *backend.Call, err error) error {
	switch c.Op {
	case backend.OpAcquire:
		return fmt.Errorf("postgres: acquire %q: %w", c.Acquire.Key, err)
	case backend.OpRenew:
		return fmt.Errorf("postgres: renew %q: %w", c.Renew.Key, err)
	default:
		return fmt.Errorf("postgres: release %q: %w", c.Release.Key, err)
	}
}

// batchOnce sends the calls named by pending as one pipeline and reads their
// answers in order. It returns how many of them were answered (in
// calls[pending[:answered]]: committed, or an answer that needs no write) and
// the error that stopped it at pending[answered], whose fate, like that of
// every later call, is unknown to this try.
func (b *Backend) batchOnce(ctx context.Context, calls []backend.Call, pending []int) (answered int, err error) {
	batch := &pgx.Batch{}
	for _, i := range pending {
		c := &calls[i]
		switch c.Op {
		case backend.OpAcquire:
			b.queueAcquire(batch, c.Acquire)
		case backend.OpRenew:
			// A transaction of its own, like the others: alone, the
			// statement would join the implicit transaction that runs up to
			// the next call's BEGIN, and commit or fail with it.
			batch.Queue("BEGIN")
			batch.Queue(b.q.renew, renewArgs(c.Renew)...)
			batch.Queue("COMMIT")
		case backend.OpRelease:
			b.queueRelease(batch, c.Release)
		}
	}
	res := b.pool.SendBatch(ctx, batch)
	defer func() {
		// Once every COMMIT has been answered, a failure to read the final
		// Sync changes no answer: it is only logged. pgxpool discards a
		// connection left in a failed transaction (a call the server
		// refused), which rolls that transaction back.
		if cerr := res.Close(); cerr != nil && err == nil {
			b.log.DebugContext(ctx, "leasehold postgres: batch answered, closing it failed", "err", cerr)
		}
	}()
	for n, i := range pending {
		c := &calls[i]
		switch c.Op {
		case backend.OpAcquire:
			c.Grant, err = readAcquire(res)
		case backend.OpRenew:
			c.Grant, c.Err, err = readRenew(res, c.Renew)
		case backend.OpRelease:
			err = readRelease(res)
		}
		if err != nil {
			c.Grant, c.Err = backend.Grant{}, nil
			return n, err
		}
	}
	return len(pending), nil
}

// readRenew reads a renewal queued by batchOnce: its answer (Grant and
// answerErr, as Renew returns them) once COMMIT succeeded, or the fault err.
func readRenew(res pgx.BatchResults, r backend.RenewRequest) (g backend.Grant, answerErr, err error) {
	if _, err := res.Exec(); err != nil {
		return backend.Grant{}, nil, err
	}
	expires, held, err := scanRenew(res.QueryRow())
	if err != nil {
		return backend.Grant{}, nil, err
	}
	if _, err := res.Exec(); err != nil {
		return backend.Grant{}, nil, err
	}
	g, answerErr = renewAnswer(r, expires, held)
	return g, answerErr, nil
}

// refusedByServer reports a fault that the server answered for one statement
// (so the pipeline's later statements were skipped, not lost), as opposed to
// a failed round trip or connection attempt.
func refusedByServer(err error) bool {
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	return errors.As(err, &pgErr) && !errors.As(err, &connectErr)
}
