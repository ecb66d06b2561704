package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// realTestSchema holds the tables of test runs against a real server; each
// run uses a table of its own, dropped at the end, so runs never see each
// other's rows.
const realTestSchema = "leasehold_test"

// newRealBackend returns a backend on a fresh table of the server named by
// LEASEHOLD_SQLSERVER_DSN (skipping when it is unset; see realServerDB).
func newRealBackend(t *testing.T, opts ...Option) (*Backend, *sql.DB, objectNames) {
	t.Helper()
	db := realServerDB(t)
	table := fmt.Sprintf("Leases_%d_%04x", time.Now().UnixNano(), rand.N(1<<16))
	n := mustNames(t, realTestSchema, table)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Dropped even when EnsureSchema fails half-way: nothing is left behind.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, stmt := range []string{"DROP TABLE IF EXISTS " + n.tableQ, "DROP TABLE IF EXISTS " + n.queueQ, "DROP TABLE IF EXISTS " + n.holdsQ,
			"DROP SEQUENCE IF EXISTS " + n.sequenceQ} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Errorf("cleanup %s: %v", stmt, err)
			}
		}
	})
	if err := EnsureSchema(ctx, db, realTestSchema, table); err != nil {
		t.Fatal(err)
	}
	b, err := New(db, append([]Option{WithTable(realTestSchema, table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, db, n
}

func realCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestRealServerEnsureSchemaConcurrently(t *testing.T) {
	db := realServerDB(t)
	table := fmt.Sprintf("Race_%d", time.Now().UnixNano())
	n := mustNames(t, realTestSchema, table)
	t.Cleanup(func() {
		db.Exec("DROP TABLE IF EXISTS " + n.tableQ)
		db.Exec("DROP TABLE IF EXISTS " + n.queueQ)
		db.Exec("DROP SEQUENCE IF EXISTS " + n.sequenceQ)
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- EnsureSchema(realCtx(t), db, realTestSchema, table) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestRealServerLifecycle(t *testing.T) {
	b, _, _ := newRealBackend(t)
	ctx := realCtx(t)
	req := backend.AcquireRequest{Key: "x'; DROP TABLE lease.Leases; --", Owner: "a", Attempt: "a-1", TTL: time.Minute, Metadata: strings.Repeat("é", backend.MaxMetadataBytes/2)}

	g1, err := b.Acquire(ctx, req)
	if err != nil || !g1.Acquired || g1.Token == 0 {
		t.Fatalf("first acquire = %+v, %v", g1, err)
	}
	busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: req.Key, Owner: "b", Attempt: "b-1", TTL: time.Minute})
	if err != nil || busy.Acquired || busy.Holder != "a" || busy.HolderToken != g1.Token || !busy.HolderExpiresAt.Equal(g1.ExpiresAt) ||
		busy.HolderExpiresIn <= 0 || busy.HolderExpiresIn > time.Minute {
		t.Fatalf("contender = %+v, %v; want busy, held by a with token %d until %v", busy, err, g1.Token, g1.ExpiresAt)
	}
	// The same owner's other attempt is another contender.
	sameOwner, err := b.Acquire(ctx, backend.AcquireRequest{Key: req.Key, Owner: "a", Attempt: "a-2", TTL: time.Minute})
	if err != nil || sameOwner.Acquired || sameOwner.HolderToken != g1.Token {
		t.Fatalf("same owner, new attempt = %+v, %v; want refused", sameOwner, err)
	}
	again, err := b.Acquire(ctx, req)
	if err != nil || !again.Acquired || again.Token != g1.Token || again.ExpiresAt.Before(g1.ExpiresAt) {
		t.Fatalf("idempotent re-acquire = %+v, %v; want token %d", again, err, g1.Token)
	}
	renewed, err := b.Renew(ctx, backend.RenewRequest{Key: req.Key, Owner: "a", Attempt: "a-1", Token: g1.Token, TTL: 2 * time.Minute})
	if err != nil || renewed.Token != g1.Token || !renewed.ExpiresAt.After(again.ExpiresAt) {
		t.Fatalf("renew = %+v, %v", renewed, err)
	}
	for _, stale := range []backend.RenewRequest{
		{Key: req.Key, Owner: "b", Attempt: "a-1", Token: g1.Token, TTL: time.Minute},
		{Key: req.Key, Owner: "a", Attempt: "a-1", Token: g1.Token + 1, TTL: time.Minute},
		{Key: req.Key, Owner: "A", Attempt: "a-1", Token: g1.Token, TTL: time.Minute},
		{Key: req.Key, Owner: "a ", Attempt: "a-1", Token: g1.Token, TTL: time.Minute},
		{Key: req.Key, Owner: "a", Attempt: "a-2", Token: g1.Token, TTL: time.Minute},
		{Key: req.Key, Owner: "a", Attempt: "A-1", Token: g1.Token, TTL: time.Minute},
	} {
		if _, err := b.Renew(ctx, stale); !errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("renew by %q/%q/%d = %v, want ErrNotHeld", stale.Owner, stale.Attempt, stale.Token, err)
		}
		tokens := []uint64{stale.Token, 0} // 0 matches whatever token the attempt holds
		if stale.Owner == "a" && stale.Attempt == "a-1" {
			tokens = tokens[:1] // the holder's own attempt: only its wrong token is stale
		}
		for _, token := range tokens {
			if err := b.Release(ctx, backend.ReleaseRequest{Key: req.Key, Owner: stale.Owner, Attempt: stale.Attempt, Token: token}); err != nil {
				t.Error(err)
			}
		}
	}
	if g, _ := b.Acquire(ctx, backend.AcquireRequest{Key: req.Key, Owner: "b", Attempt: "b-2", TTL: time.Minute}); g.Acquired {
		t.Fatal("a stale release deleted the holding")
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: req.Key, Owner: "a", Attempt: "a-1"}); err != nil { // token 0: this attempt's holding
		t.Fatal(err)
	}
	g2, err := b.Acquire(ctx, backend.AcquireRequest{Key: req.Key, Owner: "b", Attempt: "b-3", TTL: time.Minute})
	if err != nil || !g2.Acquired || g2.Token <= g1.Token {
		t.Fatalf("acquire after release = %+v, %v; want a token above %d", g2, err, g1.Token)
	}
}

// TestRealServerExactNames: names differing only in case or trailing spaces,
// and long Unicode names, are different leases.
func TestRealServerExactNames(t *testing.T) {
	b, _, _ := newRealBackend(t)
	ctx := realCtx(t)
	keys := []string{"Foo", "foo", "foo ", "foo  ", " foo", "f*o?o[]", "{foo}\n", strings.Repeat("😀", backend.MaxKeyRunes), strings.Repeat("😀", backend.MaxKeyRunes-1)}
	for i, k := range keys {
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: fmt.Sprint("owner", i), Attempt: fmt.Sprint("att", i), TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("acquire %q = %+v, %v (collides with an earlier name?)", k, g, err)
		}
	}
}

// TestRealServerExpiryTakeover: an expired holding is taken over with a
// greater token, and its old owner can no longer renew.
func TestRealServerExpiryTakeover(t *testing.T) {
	b, _, _ := newRealBackend(t)
	ctx := realCtx(t)
	g1, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "a", Attempt: "a-1", TTL: 50 * time.Millisecond})
	if err != nil || !g1.Acquired {
		t.Fatal(g1, err)
	}
	var g2 backend.Grant
	deadline := time.Now().Add(30 * time.Second)
	for !g2.Acquired && time.Now().Before(deadline) {
		if g2, err = b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "b", Attempt: "b-1", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if !g2.Acquired {
			time.Sleep(g2.HolderExpiresIn/2 + time.Millisecond) // waiting on the server's clock, nothing to signal
		}
	}
	if !g2.Acquired || g2.Token <= g1.Token {
		t.Fatalf("takeover = %+v; want a token above %d", g2, g1.Token)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "a", Attempt: "a-1", Token: g1.Token, TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("old owner's renew = %v, want ErrNotHeld", err)
	}
}

// TestRealServerOneWinner: many owners race for one name; exactly one wins.
func TestRealServerOneWinner(t *testing.T) {
	b, _, _ := newRealBackend(t)
	ctx := realCtx(t)
	var wg sync.WaitGroup
	wins := make(chan string, 16)
	for i := range 16 {
		wg.Go(func() {
			// Half the contenders share one owner: still one winner.
			g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "hot", Owner: fmt.Sprint("o", i%8), Attempt: fmt.Sprint("att", i), TTL: time.Minute})
			if err != nil {
				t.Error(err)
			}
			if g.Acquired {
				wins <- fmt.Sprint("o", i)
			}
		})
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d winners, want 1", n)
	}
}

// TestRealServerUpgradesPreviousTable: a table made by an earlier version
// (no AttemptId, no queue table, no HolderLimit, holds table or keep
// trigger) and holding a row is upgraded by EnsureSchema; the old row
// belongs to no attempt, so it is refused until it expires and cannot be
// renewed or released by any attempt; the new queue table works at once,
// and so do names with several holders.
func TestRealServerUpgradesPreviousTable(t *testing.T) {
	db := realServerDB(t)
	table := fmt.Sprintf("Old_%d", time.Now().UnixNano())
	n := mustNames(t, realTestSchema, table)
	ctx := realCtx(t)
	t.Cleanup(func() {
		db.Exec("DROP TABLE IF EXISTS " + n.tableQ)
		db.Exec("DROP TABLE IF EXISTS " + n.queueQ)
		db.Exec("DROP TABLE IF EXISTS " + n.holdsQ)
		db.Exec("DROP SEQUENCE IF EXISTS " + n.sequenceQ)
	})
	if err := EnsureSchema(ctx, db, realTestSchema, table); err != nil {
		t.Fatal(err)
	}
	// Make it an earlier version's table: drop the trigger, the holds
	// table, the queue, the columns and their defaults.
	// (Babelfish for PostgreSQL keeps no named DEFAULT constraint: there is
	// none to drop, 3728, and the column goes with its default.)
	for _, stmt := range []string{"DROP TRIGGER " + n.keepQ, "DROP TABLE " + n.holdsQ} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, dropDefault := range []string{"ALTER TABLE " + n.tableQ + " DROP CONSTRAINT " + n.dfAttempt, "ALTER TABLE " + n.tableQ + " DROP CONSTRAINT " + n.dfLimit} {
		if _, err := db.ExecContext(ctx, dropDefault); err != nil && !hasErrorNumber(err, 3728) {
			t.Fatalf("%s: %v", dropDefault, err)
		}
	}
	for _, stmt := range []string{
		"DROP TABLE " + n.queueQ,
		"ALTER TABLE " + n.tableQ + " DROP COLUMN AttemptId",
		"ALTER TABLE " + n.tableQ + " DROP COLUMN HolderLimit",
		"INSERT INTO " + n.tableQ + " (LeaseName, LeaseNameBytes, OwnerInstanceId, FencingToken, AcquiredAtUtc, RenewedAtUtc, ExpiresAtUtc, Metadata) " +
			"VALUES (N'k', DATALENGTH(N'k'), N'old', NEXT VALUE FOR " + n.sequenceQ + ", SYSDATETIMEOFFSET(), SYSDATETIMEOFFSET(), DATEADD(MINUTE, 5, SYSDATETIMEOFFSET()), NULL)",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := EnsureSchema(ctx, db, realTestSchema, table); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	b, err := New(db, WithTable(realTestSchema, table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "old", Attempt: "new-1", TTL: time.Minute,
		Wait: true, Queue: backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute}})
	if err != nil || g.Acquired || g.Holder != "old" || g.HolderExpiresIn <= 0 || !g.Queued {
		t.Fatalf("acquire over the old row = %+v, %v; want refused and queued", g, err)
	}
	// The old row is an exclusive holding (HolderLimit 1 by default).
	if g, err := b.Acquire(ctx, sharedReq("k", "s", 2)); err != nil || g.Acquired || g.HeldLimit != 1 || g.Holder != "old" {
		t.Fatalf("shared acquire over the old row = %+v, %v; want refused for limit 1", g, err)
	}
	mustAcquire(t, ctx, b, sharedReq("s", "a", 2))
	mustAcquire(t, ctx, b, sharedReq("s", "b", 2))
	if g, err := b.Acquire(ctx, sharedReq("s", "c", 2)); err != nil || g.Acquired || g.Holder != "a" {
		t.Fatalf("third holder of a name of limit 2 = %+v, %v; want refused", g, err)
	}
}

// TestRealServerQueueUnderContention: waiters enqueue concurrently while the
// name is held; each gets one place (distinct positions, none lost), and
// releases then hand the name to each of them once, in the order of their
// places, with increasing tokens, while a newcomer is refused throughout.
// This is the locking the go-sqlmock tests cannot check.
func TestRealServerQueueUnderContention(t *testing.T) {
	b, db, n := newRealBackend(t)
	ctx := realCtx(t)
	const key, waiters = "contended", 24
	q := backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute}
	first, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "first", Attempt: "first-1", TTL: time.Minute})
	if err != nil || !first.Acquired {
		t.Fatalf("first acquire = %+v, %v", first, err)
	}
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			// Each waiter polls a few times at once: a place is kept, never
			// doubled.
			for range 3 {
				g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: fmt.Sprint("w", i), Attempt: fmt.Sprint("w", i, "-1"), TTL: time.Minute, Wait: true, Queue: q})
				if err != nil || g.Acquired || !g.Queued {
					t.Errorf("waiter %d = %+v, %v; want refused and queued", i, g, err)
				}
			}
		})
	}
	wg.Wait()
	rows, err := db.QueryContext(ctx, "SELECT AttemptId FROM "+n.queueQ+" WHERE LeaseName = @name ORDER BY Position", sql.Named("name", key))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		order = append(order, a)
	}
	rows.Close()
	if len(order) != waiters {
		t.Fatalf("%d entries, want %d: %v", len(order), waiters, order)
	}
	holder := backend.ReleaseRequest{Key: key, Owner: "first", Attempt: "first-1", Token: first.Token}
	last := first.Token
	for _, attempt := range order {
		if err := b.Release(ctx, holder); err != nil {
			t.Fatal(err)
		}
		owner := strings.TrimSuffix(attempt, "-1")
		if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "newcomer", Attempt: fmt.Sprint("n-", attempt), TTL: time.Minute}); err != nil || g.Acquired || g.Holder != owner {
			t.Fatalf("newcomer after the release = %+v, %v; want refused, held by %s", g, err, owner)
		}
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: time.Minute, Wait: true, Queue: q})
		if err != nil || !g.Acquired || g.Token <= last {
			t.Fatalf("%s's pickup = %+v, %v; want a grant above token %d", attempt, g, err, last)
		}
		holder, last = backend.ReleaseRequest{Key: key, Owner: owner, Attempt: attempt, Token: g.Token}, g.Token
	}
	if err := b.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "later", Attempt: "later-1", TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("after the queue drained = %+v, %v; want a grant", g, err)
	}
}

// TestRealServerReleaseRacesWaiters: releases and hand-offs race with
// waiters joining the queue and picking up by polling; two grants never
// overlap (a holder leaves its local critical section before it releases,
// so with a correct store the count never exceeds one), tokens increase,
// and every waiter gets the name in the end.
func TestRealServerReleaseRacesWaiters(t *testing.T) {
	b, _, _ := newRealBackend(t)
	ctx := realCtx(t)
	const key, workers, rounds = "raced", 8, 5
	q := backend.QueueRequest{EntryTTL: time.Minute, Pickup: 10 * time.Second}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		holders  int
		maxSeen  int
		lastTok  uint64
		tokenErr error
	)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				attempt := fmt.Sprintf("w%d-%d", w, r)
				req := backend.AcquireRequest{Key: key, Owner: fmt.Sprint("w", w), Attempt: attempt, TTL: time.Minute, Wait: true, Queue: q}
				var g backend.Grant
				for {
					var err error
					if g, err = b.Acquire(ctx, req); err != nil {
						t.Error(err)
						return
					}
					if g.Acquired {
						break
					}
					time.Sleep(5 * time.Millisecond) // polling: SQL Server sends no hand-off notice
				}
				mu.Lock()
				holders++
				maxSeen = max(maxSeen, holders)
				if g.Token <= lastTok && tokenErr == nil {
					tokenErr = fmt.Errorf("token %d after %d", g.Token, lastTok)
				}
				lastTok = g.Token
				mu.Unlock()
				time.Sleep(time.Millisecond) // hold it a little while others queue
				mu.Lock()
				holders--
				mu.Unlock()
				if err := b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: req.Owner, Attempt: attempt, Token: g.Token}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if maxSeen != 1 || tokenErr != nil {
		t.Fatalf("at most %d holders at once, token order: %v; want 1 and increasing tokens", maxSeen, tokenErr)
	}
}
