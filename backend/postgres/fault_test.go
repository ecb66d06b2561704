package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/backend"
)

// Every server process of the backend's pool is terminated again and again
// while owners acquire, verify, renew and release one hot name and their own
// names. Operations ride through on retries (a retried acquire is the same
// attempt: a grant whose answer was lost is found again), and the hot name is
// never held by two holdings at once: whoever is granted it finds its own
// owner, attempt and token in the row (read through an unaffected
// connection) until it releases.
//
// Nothing depends on how fast either side runs: the killer ends server
// processes a fixed number of times while the owners keep working, and the
// owners keep going until it is done. A kill leaves at most 4 dead
// connections (the pool's size), and a dead connection fails one try before
// the pool drops it: all operations together see at most 20 failed tries, so
// none can use up its 40, however the kills and the operations interleave.
func TestTerminateBackendsMidOperation(t *testing.T) {
	e := newEnv(t)
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	e.pool = newPool(t, e.appName, func(c *pgxpool.Config) { c.MaxConns = 4 })
	b := e.backend(t, WithRetry(40, 2*time.Millisecond, 50*time.Millisecond),
		WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logBuf}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ctx := ctxT(t)
	defer func() {
		if t.Failed() {
			logMu.Lock()
			t.Log(logBuf.String())
			logMu.Unlock()
		}
	}()

	const kills = 5 // rounds that end at least one server process
	var (
		stop       = make(chan struct{})
		enough     = make(chan struct{}) // closed when the killer is done
		terminated atomic.Int64
		killer     sync.WaitGroup
	)
	killer.Go(func() {
		defer close(enough)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for done := 0; done < kills; {
			select {
			case <-stop: // every owner gave up
				return
			case <-tick.C:
			}
			n, err := e.kill(ctx)
			if err != nil {
				t.Errorf("terminate: %v", err)
				return
			}
			terminated.Add(int64(n))
			if n > 0 {
				done++
			}
		}
	})

	const owners, minRounds = 6, 10
	var (
		wg        sync.WaitGroup
		grants    atomic.Int64
		mu        sync.Mutex
		tokenUser = map[uint64]string{}
	)
	for i := range owners {
		owner := fmt.Sprintf("owner-%d", i)
		wg.Go(func() {
			for r := 0; ; r++ {
				if r >= minRounds {
					select {
					case <-enough:
						return
					default:
					}
				}
				own := held{key: fmt.Sprintf("own-%d-%d", i, r), owner: owner, attempt: newAttempt()}
				var err error
				own.Grant, err = b.Acquire(ctx, backend.AcquireRequest{Key: own.key, Owner: owner, Attempt: own.attempt, TTL: live})
				if err != nil || !own.Acquired {
					t.Errorf("%s: Acquire(%s) = %+v, %v", owner, own.key, own.Grant, err)
					return
				}
				if _, err := b.Renew(ctx, own.renewReq(live)); err != nil {
					t.Errorf("%s: Renew(%s) = %v", owner, own.key, err)
					return
				}
				if err := b.Release(ctx, own.releaseReq()); err != nil {
					t.Errorf("%s: Release(%s) = %v", owner, own.key, err)
					return
				}

				hot := held{key: "hot", owner: owner, attempt: newAttempt()}
				hot.Grant, err = b.Acquire(ctx, backend.AcquireRequest{Key: "hot", Owner: owner, Attempt: hot.attempt, TTL: live})
				if err != nil {
					t.Errorf("%s: Acquire(hot) = %v", owner, err)
					return
				}
				if !hot.Acquired {
					continue
				}
				grants.Add(1)
				mu.Lock()
				if prev, ok := tokenUser[hot.Token]; ok && prev != owner {
					t.Errorf("token %d granted to %s and %s", hot.Token, prev, owner)
				}
				tokenUser[hot.Token] = owner
				mu.Unlock()
				var rowOwner, rowAttempt string
				var rowToken int64
				if err := e.admin.QueryRow(ctx, "SELECT owner_instance_id, attempt, fencing_token FROM "+b.names.table+" WHERE lease_name = 'hot'").
					Scan(&rowOwner, &rowAttempt, &rowToken); err != nil || rowOwner != owner || rowAttempt != hot.attempt || uint64(rowToken) != hot.Token {
					t.Errorf("%s/%s holds hot with token %d but the row says %s/%s/%d (%v)", owner, hot.attempt, hot.Token, rowOwner, rowAttempt, rowToken, err)
				}
				if err := b.Release(ctx, hot.releaseReq()); err != nil {
					t.Errorf("%s: Release(hot) = %v", owner, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	if grants.Load() == 0 {
		t.Fatal("nobody was ever granted the hot name")
	}
	if terminated.Load() < kills {
		t.Fatalf("only %d server processes terminated", terminated.Load())
	}
	t.Logf("%d server processes terminated; hot name granted %d times", terminated.Load(), grants.Load())
}

// Every connection is lost while a lease is held: the row survives, the
// holder's renewal rides through and keeps its token, nobody else is granted
// the name while it is live, and after the holder stops renewing the name
// goes to the next owner, by its TTL (on the server's clock), with a greater
// token.
func TestHolderSurvivesConnectionLossThenExpires(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "a", live)
	if e.terminate(t) == 0 {
		t.Fatal("no connection terminated")
	}
	r, err := b.Renew(ctx, g.renewReq(live))
	if err != nil || r.Token != g.Token {
		t.Fatalf("Renew after connection loss = %+v, %v", r, err)
	}
	e.terminate(t)
	if busy := acquireAs(t, b, "k", "b", newAttempt(), live); busy.Acquired || busy.Holder != "a" || busy.HolderToken != g.Token {
		t.Fatalf("Acquire by b while a is live = %+v", busy.Grant)
	}
	// a's last renewal is a short one, then it stops: b polls, sleeping for
	// the time the server says a has left, until a's TTL has passed.
	last, err := b.Renew(ctx, g.renewReq(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var g2 held
	err = pollServer(ctx, "b to get k after a's expiry", func() (bool, error) {
		g2 = acquireAs(t, b, "k", "b", newAttempt(), time.Minute)
		return g2.Acquired, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if grantedAt := g2.ExpiresAt.Add(-time.Minute); grantedAt.Before(last.ExpiresAt) {
		t.Fatalf("b granted at %v (server clock), before a's expiry %v", grantedAt, last.ExpiresAt)
	}
	if g2.Token <= g.Token {
		t.Fatalf("takeover token %d not above %d", g2.Token, g.Token)
	}
	if _, err := b.Renew(ctx, g.renewReq(live)); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("a's renewal after takeover = %v, want ErrNotHeld", err)
	}
}

// A cancelled context is never retried. An acquire whose caller gives up while
// it waits in the server (here on the name's advisory lock) may still be
// queued there (pgx cancels it asynchronously) and commit later; the Token 0
// release of the same attempt that the engine sends after such an ambiguous
// acquire queues behind it, so no unowned lease is left behind and no
// transaction stays open. The test waits for the acquire to be queued before
// giving up, so the order is the one that matters, whatever the load.
func TestAbandonedAcquireIsCleanedUp(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(cancelled, backend.AcquireRequest{Key: "k", Owner: "a", Attempt: newAttempt(), TTL: live}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with cancelled ctx = %v", err)
	}

	tx, err := e.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", b.lockKey("k")); err != nil {
		t.Fatal(err)
	}
	attempt := newAttempt()
	actx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	acquired := make(chan error, 1)
	go func() {
		_, err := b.Acquire(actx, backend.AcquireRequest{Key: "k", Owner: "a", Attempt: attempt, TTL: live})
		acquired <- err
	}()
	waitForLockWaiters(t, e, 1) // the acquire waits on the lock in the server
	giveUp()
	// It returns while the lock is still held: it did not wait for it.
	if err := await(t, acquired, "the abandoned acquire to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned Acquire = %v, want context.Canceled", err)
	}
	released := make(chan error, 1)
	go func() { released <- b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a", Attempt: attempt}) }()
	// Free the lock once something waits on it (the abandoned acquire if it
	// is still there, or the release); in either order the release runs
	// after the acquire.
	waitForLockWaiters(t, e, 1)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := await(t, released, "cleanup release"); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, "k", "b", live)
	err = pollServer(ctx, "no connection left in a transaction", func() (bool, error) {
		var open int
		err := e.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, e.appName).Scan(&open)
		return open == 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitForLockWaiters polls the server until n of the env's server processes
// wait on an advisory lock: the server state is the only signal there is.
func waitForLockWaiters(t *testing.T, e *testEnv, n int) {
	t.Helper()
	err := pollServer(context.Background(), fmt.Sprintf("%d lock waiters", n), func() (bool, error) {
		var waiting int
		err := e.admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l
			JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1`, e.appName).Scan(&waiting)
		return waiting >= n, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Against an unreachable server every operation reports a fault (never "not
// acquired"), and a batch renewal reports the batch as unconfirmed.
func TestUnreachableServerIsAFault(t *testing.T) {
	b, err := New(poolStub(t), WithRetry(2, time.Millisecond, 2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "a", Attempt: "t1", TTL: time.Second}); err == nil || g.Acquired {
		t.Errorf("Acquire = %+v, %v; want a fault", g, err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "a", Attempt: "t1", Token: 1, TTL: time.Second}); err == nil || errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew = %v; want a fault, not ErrNotHeld", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a", Attempt: "t1"}); err == nil {
		t.Error("Release succeeded against an unreachable server")
	}
	if res, err := b.RenewBatch(ctx, []backend.RenewRequest{{Key: "k", Owner: "a", Attempt: "t1", Token: 1, TTL: time.Second}}); err == nil || res != nil {
		t.Errorf("RenewBatch = %v, %v; want no results and a fault", res, err)
	}
}
