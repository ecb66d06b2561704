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

	"github.com/leasehold/leasehold/backend"
)

// Every server process of the backend's pool is terminated again and again
// while owners acquire, verify, renew and release one hot name and their own
// names. Operations ride through on retries, and the hot name is never held
// by two owners at once: whoever is granted it finds its own owner and token
// in the row (read through an unaffected connection) until it releases.
func TestTerminateBackendsMidOperation(t *testing.T) {
	e := newEnv(t)
	var logBuf bytes.Buffer
	var logMu sync.Mutex
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

	stop := make(chan struct{})
	var terminated atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				terminated.Add(int64(e.terminate(t)))
			}
		}
	})

	const owners, rounds = 6, 10
	var (
		wg        sync.WaitGroup
		grants    atomic.Int64
		mu        sync.Mutex
		tokenUser = map[uint64]string{}
	)
	for i := range owners {
		owner := fmt.Sprintf("owner-%d", i)
		wg.Go(func() {
			for r := range rounds {
				own := fmt.Sprintf("own-%d-%d", i, r)
				g, err := b.Acquire(ctx, backend.AcquireRequest{Key: own, Owner: owner, TTL: 10 * time.Second})
				if err != nil || !g.Acquired {
					t.Errorf("%s: Acquire(%s) = %+v, %v", owner, own, g, err)
					return
				}
				if _, err := b.Renew(ctx, backend.RenewRequest{Key: own, Owner: owner, Token: g.Token, TTL: 10 * time.Second}); err != nil {
					t.Errorf("%s: Renew(%s) = %v", owner, own, err)
					return
				}
				if err := b.Release(ctx, backend.ReleaseRequest{Key: own, Owner: owner, Token: g.Token}); err != nil {
					t.Errorf("%s: Release(%s) = %v", owner, own, err)
					return
				}

				g, err = b.Acquire(ctx, backend.AcquireRequest{Key: "hot", Owner: owner, TTL: 10 * time.Second})
				if err != nil {
					t.Errorf("%s: Acquire(hot) = %v", owner, err)
					return
				}
				if !g.Acquired {
					continue
				}
				grants.Add(1)
				mu.Lock()
				if prev, ok := tokenUser[g.Token]; ok && prev != owner {
					t.Errorf("token %d granted to %s and %s", g.Token, prev, owner)
				}
				tokenUser[g.Token] = owner
				mu.Unlock()
				var rowOwner string
				var rowToken int64
				if err := e.admin.QueryRow(ctx, "SELECT owner_instance_id, fencing_token FROM "+b.names.table+" WHERE lease_name = 'hot'").
					Scan(&rowOwner, &rowToken); err != nil || rowOwner != owner || uint64(rowToken) != g.Token {
					t.Errorf("%s holds hot with token %d but the row says %s/%d (%v)", owner, g.Token, rowOwner, rowToken, err)
				}
				if err := b.Release(ctx, backend.ReleaseRequest{Key: "hot", Owner: owner, Token: g.Token}); err != nil {
					t.Errorf("%s: Release(hot) = %v", owner, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	if terminated.Load() == 0 {
		t.Fatal("no server process was terminated: the test proved nothing")
	}
	if grants.Load() == 0 {
		t.Fatal("nobody was ever granted the hot name")
	}
	t.Logf("%d server processes terminated; hot name granted %d times", terminated.Load(), grants.Load())
}

// Every connection is lost while a lease is held: the row survives, the
// holder's renewal rides through and keeps its token, nobody else is granted
// the name while it is live, and after the holder stops renewing the name
// goes to the next owner, by its TTL, with a greater token.
func TestHolderSurvivesConnectionLossThenExpires(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	const ttl = 500 * time.Millisecond
	g := mustAcquire(t, b, "k", "a", ttl)
	if e.terminate(t) == 0 {
		t.Fatal("no connection terminated")
	}
	r, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "a", Token: g.Token, TTL: ttl})
	if err != nil || r.Token != g.Token {
		t.Fatalf("Renew after connection loss = %+v, %v", r, err)
	}
	e.terminate(t)
	busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "b", TTL: ttl})
	if err != nil || busy.Acquired || busy.Holder != "a" {
		t.Fatalf("Acquire by b while a is live = %+v, %v", busy, err)
	}
	// a stops renewing: b polls until a's TTL has passed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		g2, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "b", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if g2.Acquired {
			if now := time.Now(); now.Before(r.ExpiresAt.Add(-50 * time.Millisecond)) {
				t.Fatalf("b granted at %v, before a's expiry %v", now, r.ExpiresAt)
			}
			if g2.Token <= g.Token {
				t.Fatalf("takeover token %d not above %d", g2.Token, g.Token)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never got k after a's expiry %v", r.ExpiresAt)
		}
		time.Sleep(time.Until(g2.HolderExpiresAt) + time.Millisecond) // the holder's expiry is the signal
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "a", Token: g.Token, TTL: ttl}); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("a's renewal after takeover = %v, want ErrNotHeld", err)
	}
}

// A cancelled context is never retried. An acquire whose deadline passes
// while it waits in the server (here on the name's advisory lock) may still
// be queued there when its caller gives up (pgx cancels it asynchronously);
// the Token 0 release that the engine sends after such an ambiguous acquire
// queues behind it, so no unowned lease is left behind and no transaction
// stays open.
func TestAbandonedAcquireIsCleanedUp(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(cancelled, backend.AcquireRequest{Key: "k", Owner: "a", TTL: time.Minute}); !errors.Is(err, context.Canceled) {
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
	short, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	start := time.Now()
	if _, err = b.Acquire(short, backend.AcquireRequest{Key: "k", Owner: "a", TTL: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Acquire took %v past a 100ms deadline", d)
	}
	released := make(chan error, 1)
	go func() { released <- b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a"}) }()
	// Let the release queue up (behind the abandoned acquire if that is
	// still there), then free both.
	waitForLockWaiters(t, e, 1)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := await(t, released, "cleanup release"); err != nil {
		t.Fatal(err)
	}
	g := mustAcquire(t, b, "k", "b", time.Minute)
	if g.Token == 0 {
		t.Fatal("token 0")
	}
	var open int
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, e.appName).Scan(&open); err != nil || open != 0 {
		t.Fatalf("%d connections left in a transaction (%v)", open, err)
	}
}

// waitForLockWaiters polls the server until n of the env's server processes
// wait on an advisory lock: the server state is the only signal there is.
func waitForLockWaiters(t *testing.T, e *testEnv, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := e.admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l
			JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1`, e.appName).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d lock waiters appeared", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
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
	if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "a", TTL: time.Second}); err == nil || g.Acquired {
		t.Errorf("Acquire = %+v, %v; want a fault", g, err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "a", Token: 1, TTL: time.Second}); err == nil || errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew = %v; want a fault, not ErrNotHeld", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a"}); err == nil {
		t.Error("Release succeeded against an unreachable server")
	}
	if res, err := b.RenewBatch(ctx, []backend.RenewRequest{{Key: "k", Owner: "a", Token: 1, TTL: time.Second}}); err == nil || res != nil {
		t.Errorf("RenewBatch = %v, %v; want no results and a fault", res, err)
	}
}
