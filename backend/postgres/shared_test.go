package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/backend"
)

// slot acquires one of limit n's slots of key as a new attempt.
func slot(t testing.TB, b *Backend, key, owner string, n int, ttl time.Duration) held {
	t.Helper()
	r := backend.AcquireRequest{Key: key, Owner: owner, Attempt: newAttempt(), TTL: ttl, Limit: n}
	g, err := b.Acquire(ctxT(t), r)
	if err != nil {
		t.Fatalf("Acquire(%q, %q, limit %d): %v", key, owner, n, err)
	}
	return held{Grant: g, key: key, owner: owner, attempt: r.Attempt}
}

func mustSlot(t testing.TB, b *Backend, key, owner string, n int, ttl time.Duration) held {
	t.Helper()
	h := slot(t, b, key, owner, n, ttl)
	if !h.Acquired || h.Token == 0 {
		t.Fatalf("Acquire(%q, %q, limit %d) = %+v, want a grant", key, owner, n, h.Grant)
	}
	return h
}

// record reads the name's record: its limit, token and expiry, and whether
// it is live on the server's clock.
func record(t testing.TB, e *testEnv, key string) (limit int, token int64, expires time.Time, live bool) {
	t.Helper()
	n := newNames(e.schema, e.table)
	err := e.admin.QueryRow(ctxT(t), "SELECT holder_limit, fencing_token, expires_at, expires_at > clock_timestamp() FROM "+n.table+
		" WHERE lease_name = $1 AND attempt = ''", key).Scan(&limit, &token, &expires, &live)
	if err != nil {
		t.Fatalf("the record of %q: %v", key, err)
	}
	return limit, token, expires, live
}

// The record of a name with several holders is a row of the lease table
// that ends no sooner than any of its holdings, carries the latest token and
// the limit, and ends when the last holding is released; the exclusive rows
// beside it are left as they are.
func TestSharedRecordFollowsItsHoldings(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	ex := mustAcquire(t, b, "exclusive", "a", live)
	short := mustSlot(t, b, "k", "a", 3, time.Minute)
	long := mustSlot(t, b, "k", "b", 3, 2*time.Minute)
	limit, token, expires, isLive := record(t, e, "k")
	if limit != 3 || uint64(token) != long.Token || !expires.Equal(long.ExpiresAt) || !isLive {
		t.Fatalf("record = limit %d, token %d, expires %v, live %v; want 3, %d, %v, live", limit, token, expires, isLive, long.Token, long.ExpiresAt)
	}
	// A renewal past the others extends the record; one short of it does not
	// shorten it.
	g, err := b.Renew(ctxT(t), short.renewReq(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, expires, _ = record(t, e, "k"); !expires.Equal(g.ExpiresAt) {
		t.Fatalf("record expires %v after a renewal to %v", expires, g.ExpiresAt)
	}
	// Releases move it to the latest live holding, then end it.
	if err := b.Release(ctxT(t), short.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if _, _, expires, _ = record(t, e, "k"); !expires.Equal(long.ExpiresAt) {
		t.Fatalf("record expires %v after the release, want the last holding's %v", expires, long.ExpiresAt)
	}
	if err := b.Release(ctxT(t), long.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if _, _, _, isLive = record(t, e, "k"); isLive {
		t.Fatal("the record is live after its last holding's release")
	}
	// The name is free for an exclusive grant, with a later token.
	g2 := mustAcquire(t, b, "k", "c", live)
	if g2.Token <= long.Token {
		t.Fatalf("exclusive token %d after %d", g2.Token, long.Token)
	}
	if hs, err := b.Holders(ctxT(t), "exclusive"); err != nil || len(hs) != 1 || hs[0].Token != ex.Token || hs[0].Limit != 1 {
		t.Fatalf("Holders(exclusive) = %+v, %v", hs, err)
	}
	// List sees every holding, the exclusive ones with limit 1.
	s1 := mustSlot(t, b, "m", "a", 2, time.Minute)
	s2 := mustSlot(t, b, "m", "b", 2, time.Minute)
	var got []backend.Holder
	b.listPage = 2 // a page boundary inside a name's holdings
	if err := b.List(ctxT(t), "", func(h backend.Holder) bool { got = append(got, h); return true }); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		key   string
		token uint64
		limit int
	}{{"exclusive", ex.Token, 1}, {"k", g2.Token, 1}, {"m", s1.Token, 2}, {"m", s2.Token, 2}}
	if len(got) != len(want) {
		t.Fatalf("List = %+v, want %d holdings", got, len(want))
	}
	for i, w := range want {
		if got[i].Key != w.key || got[i].Token != w.token || got[i].Limit != w.limit {
			t.Errorf("List[%d] = %+v, want %s token %d limit %d", i, got[i], w.key, w.token, w.limit)
		}
	}
}

// A Batch carrying acquires under a limit answers them as the single calls,
// in order with the calls around them; its renewals and releases of shared
// holdings are the single calls' too.
func TestBatchWithSharedCalls(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	h1 := mustSlot(t, b, "k", "a", 2, time.Minute)
	a2 := newAttempt()
	calls := []backend.Call{
		{Op: backend.OpRenew, Renew: h1.renewReq(2 * time.Minute)},
		{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "k", Owner: "b", Attempt: a2, TTL: time.Minute, Limit: 2}},
		{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "k", Owner: "c", Attempt: newAttempt(), TTL: time.Minute, Limit: 2}},
		{Op: backend.OpRelease, Release: h1.releaseReq()},
		{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "k", Owner: "d", Attempt: newAttempt(), TTL: time.Minute, Limit: 2}},
		{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "k", Owner: "e", Attempt: newAttempt(), TTL: time.Minute}},
	}
	b.Batch(ctxT(t), calls)
	for i, c := range calls {
		if c.Err != nil {
			t.Fatalf("call %d: %v", i, c.Err)
		}
	}
	if !calls[0].Grant.Acquired || !calls[1].Grant.Acquired || calls[2].Grant.Acquired || !calls[4].Grant.Acquired {
		t.Fatalf("answers %+v", calls)
	}
	if calls[5].Grant.Acquired || calls[5].Grant.HeldLimit != 2 {
		t.Fatalf("exclusive acquire of the shared name = %+v, want HeldLimit 2", calls[5].Grant)
	}
	hs, err := b.Holders(ctxT(t), "k")
	if err != nil || len(hs) != 2 || hs[0].Owner != "b" || hs[1].Owner != "d" {
		t.Fatalf("Holders = %+v, %v; want b's and d's", hs, err)
	}
}

// oldTx runs stmt with args as the previous version does: BEGIN, the name's
// lock, the statement, COMMIT; scan reads its one row (none: ErrNoRows).
func oldTx(ctx context.Context, pool *pgxpool.Pool, lockKey int64, stmt string, args []any, scan ...any) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
			return err
		}
		if len(scan) == 0 {
			_, err := tx.Exec(ctx, stmt, args...)
			return err
		}
		return tx.QueryRow(ctx, stmt, args...).Scan(scan...)
	})
}

// A process of the version before names with several holders, on the
// upgraded table, meets a name held under a limit: its acquire is refused
// (it reads the record as a live holding), its renewals and releases find
// nothing of theirs, its revoke fails (the keep trigger), and its sweep
// leaves the record alone; none of it grants or changes a holding. Once the
// last holding is released, it may take the name as always.
func TestPreviousVersionNeverGrantsASharedName(t *testing.T) {
	e := newEnv(t)
	n := newNames(e.schema, e.table)
	old := previousBuildQueries(n)
	b := e.backend(t, WithSweep(0, 0))
	ctx := ctxT(t)
	h1 := mustSlot(t, b, "k", "a", 3, time.Minute)
	h2 := mustSlot(t, b, "k", "b", 3, time.Minute) // a slot is still free
	key := b.lockKey("k")
	before, err := b.Holders(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}

	for _, wait := range []bool{false, true} {
		var (
			acquired, queued bool
			token, left      int64
			expires          time.Time
			holder           string
		)
		// Without a queue entry: a waiter queued by it would have its turn
		// at a free slot, as any head (the queue is fairness, not safety).
		args := []any{"k", "old", newAttempt(), live.Microseconds(), "", old.seq, wait, int64(0), int64(0), "", "", int64(0)}
		if err := oldTx(ctx, e.admin, key, old.acquire, args, &acquired, &token, &expires, &holder, &left, &queued); err != nil {
			t.Fatalf("previous acquire: %v", err)
		}
		if acquired || holder != recordOwner || left <= 0 {
			t.Fatalf("previous acquire (wait %v) = acquired %v, holder %q, left %d; want refused by the record", wait, acquired, holder, left)
		}
	}
	// Its renewal and release name attempts that have no row of theirs.
	for _, h := range []held{h1, h2} {
		err := e.admin.QueryRow(ctx, old.renew, h.key, h.owner, h.attempt, int64(h.Token), live.Microseconds()).Scan(new(time.Time))
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("previous renew of a shared holding: %v, want no row", err)
		}
		if err := oldTx(ctx, e.admin, key, old.release, []any{h.key, h.owner, h.attempt, int64(h.Token), b.channel, old.seq}); err != nil {
			t.Fatalf("previous release: %v", err)
		}
	}
	// Its revoke, of any holding or of the record's token, fails.
	_, recToken, _, _ := record(t, e, "k")
	for _, tok := range []int64{0, recToken} {
		var h [6]any
		for i := range h {
			h[i] = new(any)
		}
		err := oldTx(ctx, e.admin, key, old.revoke, []any{"k", tok, b.channel, old.seq}, h[:]...)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55000" {
			t.Fatalf("previous revoke (token %d) = %v, want the keep trigger's error", tok, err)
		}
	}
	// Its sweep deletes only what has expired.
	if _, err := e.admin.Exec(ctx, old.sweep, 100); err != nil {
		t.Fatal(err)
	}
	after, err := b.Holders(ctx, "k")
	if err != nil || len(after) != len(before) {
		t.Fatalf("Holders after the previous version's calls = %+v, %v; want %+v", after, err, before)
	}
	for i := range after {
		if after[i].Token != before[i].Token || after[i].Owner != before[i].Owner {
			t.Fatalf("Holders after the previous version's calls = %+v, want %+v", after, before)
		}
	}
	// The free slot is still free: nothing was queued that would take it.
	h3 := mustSlot(t, b, "k", "c", 3, time.Minute)

	for _, h := range []held{h1, h2, h3} {
		if err := b.Release(ctx, h.releaseReq()); err != nil {
			t.Fatal(err)
		}
	}
	var acquired, queued bool
	var token, left int64
	var expires time.Time
	var holder string
	args := []any{"k", "old", newAttempt(), live.Microseconds(), "", old.seq, false, int64(0), int64(0), "", "", int64(0)}
	if err := oldTx(ctx, e.admin, key, old.acquire, args, &acquired, &token, &expires, &holder, &left, &queued); err != nil {
		t.Fatal(err)
	}
	if !acquired || uint64(token) <= h3.Token {
		t.Fatalf("previous acquire of the released name = acquired %v, token %d; want a grant above %d", acquired, token, h3.Token)
	}
	if g := slot(t, b, "k", "d", 3, time.Minute); g.Acquired || g.HeldLimit != 1 {
		t.Fatalf("limit 3 on the previous version's holding = %+v, want HeldLimit 1", g.Grant)
	}
}

// A table of the version before names with several holders (no
// holder_limit columns, no holds table, no keep trigger) is upgraded by
// EnsureSchema: its exclusive holdings and queue entries stay as they were,
// and names with several holders work on it.
func TestEnsureSchemaAddsSharedHoldings(t *testing.T) {
	e := newEnv(t)
	n := newNames(e.schema, e.table)
	b := e.backend(t)
	ctx := ctxT(t)
	ex := mustAcquire(t, b, "x", "a", live)
	for _, stmt := range []string{
		"DROP TRIGGER " + n.keepName + " ON " + n.table,
		"DROP FUNCTION " + n.keep + "()",
		"DROP FUNCTION " + n.release + "(text, text, text, bigint, text)",
		"DROP FUNCTION " + n.renew + "(text, text, text, bigint, bigint)",
		"DROP FUNCTION " + n.acquire + "(text, text, text, bigint, text, regclass, boolean, bigint, bigint, text, text, bigint, integer)",
		"DROP TABLE " + n.holds,
		"ALTER TABLE " + n.table + " DROP COLUMN holder_limit",
		"ALTER TABLE " + n.queue + " DROP COLUMN holder_limit",
	} {
		if _, err := e.admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for range 2 { // the upgrade, then a call that finds nothing to do
		if err := EnsureSchema(ctx, e.admin, e.schema, e.table); err != nil {
			t.Fatalf("EnsureSchema on the previous tables: %v", err)
		}
	}
	var triggers int
	if err := e.admin.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal", n.table).Scan(&triggers); err != nil || triggers != 1 {
		t.Fatalf("triggers on the lease table after the upgrade: %d, %v; want the keep trigger", triggers, err)
	}
	b = e.backend(t) // statements prepared on the old tables are not reused
	if hs, err := b.Holders(ctx, "x"); err != nil || len(hs) != 1 || hs[0].Token != ex.Token || hs[0].Limit != 1 {
		t.Fatalf("Holders(x) after the upgrade = %+v, %v", hs, err)
	}
	s := mustSlot(t, b, "s", "a", 2, time.Minute)
	if s.Token <= ex.Token {
		t.Fatalf("token %d after %d", s.Token, ex.Token)
	}
	mustSlot(t, b, "s", "b", 2, time.Minute)
	if g := slot(t, b, "s", "c", 2, time.Minute); g.Acquired {
		t.Fatalf("a third holder of limit 2: %+v", g.Grant)
	}
}

// Holders of one name renewing while others release, acquire and revoke
// take the record and the holdings in the same order: no call fails (a
// deadlock would fail one after the server's deadlock timeout), never more
// than the limit hold at once, and the record never ends before a live
// holding.
func TestSharedCallsInterleave(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	n := newNames(e.schema, e.table)
	const limit, workers, rounds = 3, 4, 15
	errs := make(chan error, workers*rounds*3)
	done := make(chan struct{})
	ctx := ctxT(t) // every call ends with it: the test fails rather than hangs
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range rounds {
				r := backend.AcquireRequest{Key: "k", Owner: fmt.Sprintf("w%d", w), Attempt: newAttempt(), TTL: time.Minute, Limit: limit}
				g, err := b.Acquire(ctx, r)
				if err != nil {
					errs <- err
					return
				}
				if !g.Acquired {
					continue
				}
				h := held{Grant: g, key: r.Key, owner: r.Owner, attempt: r.Attempt}
				if _, err := b.Renew(ctx, h.renewReq(time.Duration(1+i%3)*time.Minute)); err != nil && !errors.Is(err, backend.ErrNotHeld) {
					errs <- err
				}
				if w == 0 && i%4 == 0 {
					if _, _, err := b.Revoke(ctx, "k", 0); err != nil {
						errs <- err
					}
				}
				if err := b.Release(ctx, h.releaseReq()); err != nil {
					errs <- err
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var over, orphans int
	if err := e.admin.QueryRow(ctxT(t), `SELECT
		(SELECT count(*) FROM `+n.holds+` h WHERE h.expires_at > clock_timestamp()) - `+fmt.Sprint(limit)+`,
		(SELECT count(*) FROM `+n.holds+` h WHERE h.expires_at > clock_timestamp() AND NOT EXISTS (
			SELECT 1 FROM `+n.table+` m WHERE m.lease_name = h.lease_name AND m.attempt = '' AND m.expires_at >= h.expires_at))`).Scan(&over, &orphans); err != nil {
		t.Fatal(err)
	}
	if over > 0 || orphans > 0 {
		t.Fatalf("%d holdings above the limit, %d live holdings the record ends before", over, orphans)
	}
}

// RenewBatch renews shared and exclusive holdings together, extending a
// shared name's record with its holding, and answers ErrNotHeld for a
// released shared holding.
func TestRenewBatchWithSharedHoldings(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ex := mustAcquire(t, b, "x", "a", time.Minute)
	s1 := mustSlot(t, b, "s", "a", 2, time.Minute)
	s2 := mustSlot(t, b, "s", "b", 2, time.Minute)
	if err := b.Release(ctxT(t), s2.releaseReq()); err != nil {
		t.Fatal(err)
	}
	rs, err := b.RenewBatch(ctxT(t), []backend.RenewRequest{ex.renewReq(time.Hour), s1.renewReq(2 * time.Hour), s2.renewReq(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err != nil || rs[1].Err != nil || !errors.Is(rs[2].Err, backend.ErrNotHeld) {
		t.Fatalf("RenewBatch = %+v", rs)
	}
	if _, _, expires, _ := record(t, e, "s"); !expires.Equal(rs[1].Grant.ExpiresAt) {
		t.Fatalf("record expires %v after the batch renewed its holding to %v", expires, rs[1].Grant.ExpiresAt)
	}
}

// A table of the version whose shared acquire was a transaction of several
// round trips (no acquire function) is upgraded by EnsureSchema: the
// function is created, and the holdings already there are kept.
func TestEnsureSchemaAddsSharedAcquireFunction(t *testing.T) {
	e := newEnv(t)
	n := newNames(e.schema, e.table)
	ctx := ctxT(t)
	b := e.backend(t)
	a := mustSlot(t, b, "s", "a", 2, time.Minute)
	drop := "DROP FUNCTION " + n.acquire + "(text, text, text, bigint, text, regclass, boolean, bigint, bigint, text, text, bigint, integer)"
	if _, err := e.admin.Exec(ctx, drop); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSchema(ctx, e.admin, e.schema, e.table); err != nil {
		t.Fatalf("EnsureSchema without the acquire function: %v", err)
	}
	b = e.backend(t)
	c := mustSlot(t, b, "s", "c", 2, time.Minute)
	if c.Token <= a.Token {
		t.Fatalf("token %d after %d", c.Token, a.Token)
	}
	if g := slot(t, b, "s", "d", 2, time.Minute); g.Acquired {
		t.Fatalf("a third holder of limit 2: %+v", g.Grant)
	}
}
