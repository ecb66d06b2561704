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

// Batch makes every call in calls in one round trip (a pgx.Batch: one
// pipeline on one pooled connection) and fills in each call's Grant and Err as
// Acquire, Renew or Release would have answered it, with the same statements.
//
// Each call is its own transaction (BEGIN ... COMMIT): a batch is not a
// transaction, and one call's failure never undoes another's. Calls run in
// slice order on one connection, so calls on the same key keep their order. A
// call that breaks the request limits gets an error wrapping
// backend.ErrInvalidRequest and is not sent.
//
// The calls' transactions commit without waiting for the WAL flush, and the
// round trip ends with one more transaction that does wait (synchronous
// commit, as the single calls do): its flush covers every earlier commit
// record of the WAL, so the round trip costs one flush, not one per call, and
// no answer is given before it is durable: an answer counts only once that
// last COMMIT succeeded. The flush is a transaction of its own because only a
// transaction that was given an ID writes a commit record and waits for it: a
// call that changed nothing (a release of a holding already gone, a renewal
// of an expired one) would flush nothing, however it was committed.
//
// PostgreSQL skips the rest of a pipeline after an error (up to its single
// Sync). A failed round trip is therefore sent again as a whole (a transient
// fault, see WithRetry, with the single calls' backoff, the batch's tries
// counted together): the calls whose answers were read are made again, which
// is safe because every call is idempotent (an acquire retried with the same
// Attempt refreshes its own holding, a release or renew repeated is harmless).
// When the faults outlast the retries, a fault the server reported for one
// call is that call's answer and the other calls are sent again; a failed
// round trip (the connection, the context) is the answer of every call still
// without one: each may have been applied.
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
	b.batchRun(ctx, calls, pending)
}

// batchRun makes the calls named by pending in one round trip, sent again
// as a whole after a transient fault (see Batch).
func (b *Backend) batchRun(ctx context.Context, calls []backend.Call, pending []int) {
	for tries := 1; len(pending) > 0; {
		var failed int
		err := b.inSlot(ctx, func(ctx context.Context) error {
			var err error
			failed, err = b.batchOnce(ctx, calls, pending)
			return err
		})
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
		calls[pending[failed]].Err = callError(&calls[pending[failed]], err)
		pending = append(pending[:failed:failed], pending[failed+1:]...)
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

// batchOnce sends the calls named by pending as one pipeline, the last one
// committing synchronously, and reads their answers in order. A nil error
// means every answer counts. Otherwise no answer counts (each is reset) and
// failed is the index in pending of the call whose answer could not be read:
// for a fault the server reported, the call it refused.
func (b *Backend) batchOnce(ctx context.Context, calls []backend.Call, pending []int) (failed int, err error) {
	batch := &pgx.Batch{}
	lock, renew := b.q.lockDeferred, b.q.renewDeferred
	for _, i := range pending {
		c := &calls[i]
		switch c.Op {
		case backend.OpAcquire:
			b.queueAnyAcquire(batch, c.Acquire, lock)
		case backend.OpRenew:
			// A transaction of its own, like the others: alone, the
			// statement would join the implicit transaction that runs up to
			// the next call's BEGIN, and commit or fail with it.
			batch.Queue("BEGIN")
			batch.Queue(renew, renewArgs(c.Renew)...)
			batch.Queue("COMMIT")
		case backend.OpRelease:
			b.queueRelease(batch, c.Release, lock)
		}
	}
	// The flush: a transaction that takes an ID and commits synchronously.
	batch.Queue("BEGIN")
	batch.Queue(flushQuery)
	batch.Queue("COMMIT")
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
			reset(calls, pending)
			return n, err
		}
	}
	for range 3 { // BEGIN, the flush, COMMIT
		if _, err := res.Exec(); err != nil {
			reset(calls, pending)
			// Every call was applied but none is durable yet: the round
			// trip failed as a whole (the last call stands for it).
			return len(pending) - 1, err
		}
	}
	return 0, nil
}

// flushQuery writes a record to the WAL inside its transaction (a
// transactional logical message, which any role may emit and which gives the
// transaction an ID), so that its COMMIT waits for the WAL flush up to it, and
// makes that commit synchronous whatever the server's default. (A transaction
// that only took an ID, txid_current(), commits asynchronously: PostgreSQL
// flushes at commit only for transactions that wrote WAL.)
const flushQuery = `SELECT pg_logical_emit_message(true, 'leasehold', 'flush'), ` + syncCommit

// reset forgets the answers read so far: none counts.
func reset(calls []backend.Call, pending []int) {
	for _, i := range pending {
		calls[i].Grant, calls[i].Err = backend.Grant{}, nil
	}
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
