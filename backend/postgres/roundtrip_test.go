package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/backend"
)

// lockWatch is a pgx tracer that, before each round trip a connection of
// the pool starts (a statement or a pipeline), asks the server whether a
// connection of the pool holds an advisory lock: with one call at a time,
// one does only if a transaction kept a name's lock while the server waited
// for the client.
type lockWatch struct {
	admin *pgxpool.Pool
	app   string

	mu   sync.Mutex
	on   bool
	seen []string // the statements that started with a name's lock held

	// stalled, when set, is closed at the first such round trip, which then
	// waits for resume: a client that stalls between round trips.
	stalled, resume chan struct{}
}

func (w *lockWatch) check(ctx context.Context, sql string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.on {
		return
	}
	var held int
	err := w.admin.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1`, w.app).Scan(&held)
	switch {
	case err != nil:
		w.seen = append(w.seen, fmt.Sprintf("(lock check failed: %v)", err))
	case held > 0:
		if len(sql) > 80 {
			sql = sql[:80]
		}
		w.seen = append(w.seen, sql)
		if w.stalled != nil && len(w.seen) == 1 {
			close(w.stalled)
			<-w.resume
		}
	}
}

func (w *lockWatch) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	w.check(ctx, d.SQL)
	return ctx
}

func (w *lockWatch) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (w *lockWatch) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	w.check(ctx, "(a pipeline)")
	return ctx
}

func (w *lockWatch) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (w *lockWatch) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// No call holds a name's lock across round trips: the name's lock is taken
// and released within one round trip of every acquire (either limit, granted,
// refused and queued, handing slots on), release, renewal and batch, so that
// no holder or waiter of a name ever waits for another's client, however
// slow its link. (Revoke, an operator's act, keeps its lock up to its
// COMMIT: its answer must be exact.)
func TestNoNameLockHeldAcrossRoundTrips(t *testing.T) {
	e := newEnv(t)
	w := &lockWatch{admin: e.admin, app: randomName("lh_rt_")}
	pool := newPool(t, w.app, func(c *pgxpool.Config) { c.ConnConfig.Tracer = w })
	b, err := New(pool, WithTable(e.schema, e.table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	w.mu.Lock()
	w.on = true
	w.mu.Unlock()

	h1 := mustSlot(t, b, "s", "a", 2, time.Minute)
	mustSlot(t, b, "s", "b", 2, time.Minute)
	wait := backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute}
	r := backend.AcquireRequest{Key: "s", Owner: "c", Attempt: newAttempt(), TTL: time.Minute, Limit: 2, Wait: true, Queue: wait}
	if g, err := b.Acquire(ctx, r); err != nil || g.Acquired || !g.Queued {
		t.Fatalf("a third acquire of limit 2 = %+v, %v; want refused and queued", g, err)
	}
	if _, err := b.Renew(ctx, h1.renewReq(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, h1.releaseReq()); err != nil { // hands the slot to c
		t.Fatal(err)
	}
	x := mustAcquire(t, b, "x", "a", time.Minute)
	calls := []backend.Call{
		{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "s", Owner: "d", Attempt: newAttempt(), TTL: time.Minute, Limit: 2}},
		{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "t", Owner: "d", Attempt: newAttempt(), TTL: time.Minute, Limit: 3}},
		{Op: backend.OpRenew, Renew: x.renewReq(time.Minute)},
		{Op: backend.OpRelease, Release: x.releaseReq()},
	}
	b.Batch(ctx, calls)
	for i, c := range calls {
		if c.Err != nil {
			t.Fatalf("batch call %d: %v", i, c.Err)
		}
	}
	if _, err := b.RenewBatch(ctx, []backend.RenewRequest{h1.renewReq(time.Minute)}); err != nil {
		t.Fatal(err)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) > 0 {
		t.Errorf("%d round trips started while a connection held a name's lock (a transaction waiting for its client), first: %q",
			len(w.seen), w.seen[0])
	}
}

// A departed waiter's clean-up (a release with token 0) never waits for
// another client's round trips: while the client of another acquire of the
// name stalls, however long, the clean-up removes the waiter's entry at once,
// so no slot is later handed to a waiter that has gone.
func TestDepartedWaiterCleanUpNeverWaitsForAStalledClient(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	ctx := ctxT(t)
	mustSlot(t, b, "s", "a", 2, time.Minute)
	mustSlot(t, b, "s", "b", 2, time.Minute)
	wait := backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute}
	w := backend.AcquireRequest{Key: "s", Owner: "w", Attempt: newAttempt(), TTL: time.Minute, Limit: 2, Wait: true, Queue: wait}
	if g, err := b.Acquire(ctx, w); err != nil || !g.Queued {
		t.Fatalf("the waiter's acquire = %+v, %v; want queued", g, err)
	}

	// Another Manager's client, which stalls at any round trip it would
	// start while its connection holds a name's lock.
	lw := &lockWatch{admin: e.admin, app: randomName("lh_stall_"), on: true, stalled: make(chan struct{}), resume: make(chan struct{})}
	pool := newPool(t, lw.app, func(c *pgxpool.Config) { c.ConnConfig.Tracer = lw })
	slow, err := New(pool, WithTable(e.schema, e.table), WithSweep(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := slow.Acquire(ctx, backend.AcquireRequest{Key: "s", Owner: "c", Attempt: newAttempt(), TTL: time.Minute, Limit: 2,
			Wait: true, Queue: wait})
		done <- err
	}()
	var finished bool
	select {
	case <-lw.stalled:
	case err := <-done:
		if err != nil {
			t.Fatalf("the other acquire: %v", err)
		}
		finished = true
	}
	defer func() {
		close(lw.resume)
		if !finished {
			<-done
		}
	}()

	// The clean-up, bounded as the engine bounds releases (shorter here: a
	// wait of any length is the fault).
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := b.Release(cctx, backend.ReleaseRequest{Key: "s", Owner: "w", Attempt: w.Attempt}); err != nil {
		t.Fatalf("the departed waiter's clean-up: %v", err)
	}
	var left int
	n := newNames(e.schema, e.table)
	if err := e.admin.QueryRow(ctx, "SELECT count(*) FROM "+n.queue+" WHERE lease_name = 's' AND attempt = $1", w.Attempt).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("the departed waiter's entry is still queued after its clean-up returned")
	}
}
