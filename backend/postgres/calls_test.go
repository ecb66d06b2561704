package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/backend"
)

// Many more concurrent calls than the pool has connections all succeed, on
// at most the pool's connections: the calls beyond the pool's wait their
// turn (no "too many clients", no error).
func TestCallsInFlightBoundedByThePool(t *testing.T) {
	e := newEnv(t)
	const maxConns, calls = 2, 50
	app := randomName("lh_calls_")
	pool := newPool(t, app, func(c *pgxpool.Config) { c.MaxConns = maxConns })
	b, err := New(pool, WithTable(e.schema, e.table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := backend.AcquireRequest{Key: fmt.Sprint("x", i), Owner: "o", Attempt: newAttempt(), TTL: time.Minute}
			if i%2 == 0 {
				r.Key, r.Limit = "s", calls
			}
			g, err := b.Acquire(ctx, r)
			if err == nil && !g.Acquired {
				err = fmt.Errorf("acquire %q refused: %+v", r.Key, g)
			}
			if err == nil {
				err = b.Release(ctx, backend.ReleaseRequest{Key: r.Key, Owner: r.Owner, Attempt: r.Attempt, Token: g.Token})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d calls failed, first: %v", len(errs), calls, errs[0])
	}
	if got := connections(t, e, app, "%"); got > maxConns {
		t.Errorf("%d server connections of the pool, want at most MaxConns %d", got, maxConns)
	}
	if s := pool.Stat(); s.TotalConns() > maxConns {
		t.Errorf("the pool counts %d connections, want at most %d", s.TotalConns(), maxConns)
	}
}

// A call that finds every call slot taken waits with its caller's context:
// it ends when that context does, having sent nothing.
func TestCallWaitingForASlotEndsWithItsContext(t *testing.T) {
	e := newEnv(t)
	app := randomName("lh_slot_")
	pool := newPool(t, app, func(c *pgxpool.Config) { c.MaxConns = 1 })
	b, err := New(pool, WithTable(e.schema, e.table), WithSweep(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	// The one slot is taken by an acquire that waits on the server for the
	// name's lock, which a transaction of the admin holds.
	tx, err := e.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", b.lockKey("busy")); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, backend.AcquireRequest{Key: "busy", Owner: "a", Attempt: newAttempt(), TTL: time.Minute, Limit: 2})
		first <- err
	}()
	if err := pollServer(ctx, "the acquire to wait for the name's lock", func() (bool, error) {
		var waiting bool
		err := e.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1)`, app).Scan(&waiting)
		return waiting, err
	}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(short, backend.AcquireRequest{Key: "other", Owner: "b", Attempt: newAttempt(), TTL: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an acquire waiting for the only slot = %v, want its context's deadline", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the acquire that held the slot: %v", err)
	}
	if n := e.rows(t); n != 1 { // the record of "busy"; nothing of "other"
		t.Fatalf("%d rows, want only the record of the first acquire's name", n)
	}
}
