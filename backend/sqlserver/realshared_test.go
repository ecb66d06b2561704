package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Tests of names with several holders against the real server of
// LEASEHOLD_SQLSERVER_DSN (skipped without it, as every real-server test).

func sharedReq(key, who string, limit int) backend.AcquireRequest {
	return backend.AcquireRequest{Key: key, Owner: who, Attempt: who + "-1", TTL: time.Minute, Limit: limit}
}

func mustAcquire(t *testing.T, ctx context.Context, b *Backend, r backend.AcquireRequest) backend.Grant {
	t.Helper()
	g, err := b.Acquire(ctx, r)
	if err != nil || !g.Acquired {
		t.Fatalf("acquire %s by %s (limit %d) = %+v, %v; want granted", r.Key, r.Attempt, r.Limit, g, err)
	}
	return g
}

// record reads the name's lease-table row as a test sees it.
type record struct {
	owner, attempt string
	token          int64
	limit          int64
	live           bool
}

func readRecord(t *testing.T, ctx context.Context, db *sql.DB, n objectNames, key string) (record, bool) {
	t.Helper()
	var r record
	err := db.QueryRowContext(ctx, "SELECT OwnerInstanceId, AttemptId, FencingToken, HolderLimit, CASE WHEN ExpiresAtUtc > SYSDATETIMEOFFSET() THEN 1 ELSE 0 END FROM "+
		n.tableQ+" WHERE LeaseName = @name AND LeaseNameBytes = DATALENGTH(@name)", sql.Named("name", key)).
		Scan(&r.owner, &r.attempt, &r.token, &r.limit, &r.live)
	if errors.Is(err, sql.ErrNoRows) {
		return record{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

func countHolds(t *testing.T, ctx context.Context, db *sql.DB, n objectNames, key string) int {
	t.Helper()
	var c int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+n.holdsQ+" WHERE LeaseName = @name AND LeaseNameBytes = DATALENGTH(@name) AND ExpiresAtUtc > SYSDATETIMEOFFSET()",
		sql.Named("name", key)).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRealServerSharedRecordLayout: a name of limit 3 has one lease-table
// row, its record (no attempt, HolderLimit 3, the record's owner, the
// latest token), and a row of the holds table per holding; an exclusive
// acquire is refused for the limit, naming the holding that ends first;
// releasing the last holding lets the record expire, and the name then
// takes any limit.
func TestRealServerSharedRecordLayout(t *testing.T) {
	b, db, n := newRealBackend(t)
	ctx := realCtx(t)
	const key = "shared"
	g1 := mustAcquire(t, ctx, b, sharedReq(key, "a", 3))
	r2 := sharedReq(key, "b", 3)
	r2.TTL = 2 * time.Minute
	g2 := mustAcquire(t, ctx, b, r2)
	if g2.Token <= g1.Token {
		t.Fatalf("tokens %d then %d", g1.Token, g2.Token)
	}
	rec, ok := readRecord(t, ctx, db, n, key)
	if !ok || rec.owner != recordOwner || rec.attempt != "" || rec.limit != 3 || rec.token != int64(g2.Token) || !rec.live {
		t.Fatalf("record = %+v (present %t); want the record of limit 3 with token %d", rec, ok, g2.Token)
	}
	if c := countHolds(t, ctx, db, n, key); c != 2 {
		t.Fatalf("%d live holdings in the holds table, want 2", c)
	}
	ex, err := b.Acquire(ctx, sharedReq(key, "x", 1))
	if err != nil || ex.Acquired || ex.HeldLimit != 3 || ex.Holder != "a" || ex.HolderToken != g1.Token || ex.Queued {
		t.Fatalf("exclusive acquire = %+v, %v; want refused for limit 3, naming a", ex, err)
	}
	other, err := b.Acquire(ctx, sharedReq(key, "y", 2))
	if err != nil || other.Acquired || other.HeldLimit != 3 || other.Holder != "a" {
		t.Fatalf("acquire of limit 2 = %+v, %v; want refused for limit 3", other, err)
	}
	h, held, err := b.Inspect(ctx, key)
	if err != nil || !held || h.Owner != "a" || h.Token != g1.Token || h.Limit != 3 {
		t.Fatalf("Inspect = %+v, %v, %v; want a's holding, limit 3", h, held, err)
	}
	hs, err := b.Holders(ctx, key)
	if err != nil || len(hs) != 2 || hs[0].Token != g1.Token || hs[1].Token != g2.Token || hs[1].Owner != "b" || hs[1].Limit != 3 {
		t.Fatalf("Holders = %+v, %v", hs, err)
	}
	var listed []backend.Holder
	if err := b.List(ctx, "", func(h backend.Holder) bool { listed = append(listed, h); return true }); err != nil || len(listed) != 2 {
		t.Fatalf("List = %+v, %v; want the two holdings", listed, err)
	}
	for _, r := range []backend.ReleaseRequest{{Key: key, Owner: "a", Attempt: "a-1", Token: g1.Token}, {Key: key, Owner: "b", Attempt: "b-1"}} {
		if err := b.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if rec, ok := readRecord(t, ctx, db, n, key); ok && rec.live {
		t.Fatalf("record after the last release = %+v; want expired", rec)
	}
	if _, held, err := b.Inspect(ctx, key); err != nil || held {
		t.Fatalf("Inspect after the last release = %v, %v", held, err)
	}
	g3 := mustAcquire(t, ctx, b, sharedReq(key, "x", 1))
	if g3.Token <= g2.Token {
		t.Fatalf("exclusive token %d after shared token %d", g3.Token, g2.Token)
	}
	if rec, _ := readRecord(t, ctx, db, n, key); rec.limit != 1 || rec.attempt != "x-1" {
		t.Fatalf("row after the exclusive grant = %+v", rec)
	}
	sh, err := b.Acquire(ctx, sharedReq(key, "z", 3))
	if err != nil || sh.Acquired || sh.HeldLimit != 1 || sh.Holder != "x" {
		t.Fatalf("shared acquire over an exclusive holding = %+v, %v; want refused for limit 1", sh, err)
	}
}

// previousAcquire runs the previous version's acquire batch and returns its
// outcome and holder.
func previousAcquire(t *testing.T, ctx context.Context, b *Backend, prev queries, r backend.AcquireRequest) (int64, string) {
	t.Helper()
	var (
		outcome int64
		holder  sql.NullString
		token   sql.NullInt64
		expires sql.NullTime
		rowVer  []byte
		remUs   sql.NullInt64
		queued  bool
	)
	if err := b.db.QueryRowContext(ctx, prev.acquire, b.acquireArgs(r)...).Scan(&outcome, &holder, &token, &expires, &rowVer, &remUs, &queued); err != nil {
		t.Fatalf("previous acquire: %v", err)
	}
	return outcome, holder.String
}

// TestRealServerPreviousVersionNeverGrantsASharedName: the previous
// version's batches, on this version's table, read a name with several
// holders as held by the record's owner: its acquire is refused (whatever
// attempt, the holders' own included), its renewal and release of a
// holding match nothing, and its revoke fails (the keep trigger) and
// leaves the holdings as they were. Once the holdings are gone it grants
// the name exclusively as always.
func TestRealServerPreviousVersionNeverGrantsASharedName(t *testing.T) {
	b, db, n := newRealBackend(t)
	ctx := realCtx(t)
	prev := previousQueries(n)
	const key = "shared"
	g1 := mustAcquire(t, ctx, b, sharedReq(key, "a", 2))
	g2 := mustAcquire(t, ctx, b, sharedReq(key, "b", 2))

	for _, r := range []backend.AcquireRequest{sharedReq(key, "old", 1), sharedReq(key, "a", 1), {Key: key, Owner: recordOwner, Attempt: "x", TTL: time.Minute}} {
		if outcome, holder := previousAcquire(t, ctx, b, prev, r); outcome != outcomeBusy || holder != recordOwner {
			t.Errorf("previous acquire by %s = outcome %d, holder %q; want refused, held by %q", r.Attempt, outcome, holder, recordOwner)
		}
	}
	for _, g := range []struct {
		who   string
		token uint64
	}{{"a", g1.Token}, {"b", g2.Token}} {
		rows, err := db.QueryContext(ctx, prev.renew, renewArgs(backend.RenewRequest{Key: key, Owner: g.who, Attempt: g.who + "-1", Token: g.token, TTL: time.Minute}, int64(g.token))...)
		if err != nil {
			t.Fatal(err)
		}
		renewed := rows.Next()
		rows.Close()
		if renewed {
			t.Errorf("previous renew of %s's holding renewed a row", g.who)
		}
		var released int64
		var o, a sql.NullString
		var ht, hp sql.NullInt64
		if err := db.QueryRowContext(ctx, prev.release, releaseArgs(backend.ReleaseRequest{Key: key, Owner: g.who, Attempt: g.who + "-1"}, 0)...).
			Scan(&released, &o, &a, &ht, &hp); err != nil || released != 0 {
			t.Errorf("previous release of %s's holding = %d, %v; want nothing released", g.who, released, err)
		}
	}
	// The first revoke finds no waiter and would delete the record; the
	// second, after a waiter of the previous version queued, would hand it
	// on by rewriting it as that waiter's holding.
	for i, token := range []int64{0, int64(g2.Token)} {
		if i == 1 {
			w := sharedReq(key, "oldw", 1)
			w.Wait, w.Queue = true, backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute}
			if outcome, holder := previousAcquire(t, ctx, b, prev, w); outcome != outcomeBusy || holder != recordOwner {
				t.Fatalf("previous waiting acquire = outcome %d, holder %q; want refused", outcome, holder)
			}
		}
		rows, err := db.QueryContext(ctx, prev.revoke, sql.Named("name", key), sql.Named("token", token))
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		if !hasErrorNumber(err, 50102) {
			t.Errorf("previous revoke of token %d = %v; want the keep trigger's error 50102", token, err)
		}
	}
	hs, err := b.Holders(ctx, key)
	if err != nil || len(hs) != 2 || hs[0].Token != g1.Token || hs[1].Token != g2.Token {
		t.Fatalf("Holders after the previous version's calls = %+v, %v; want both holdings", hs, err)
	}
	if rec, ok := readRecord(t, ctx, db, n, key); !ok || !rec.live || rec.limit != 2 {
		t.Fatalf("record after the previous version's calls = %+v, %t", rec, ok)
	}
	for _, who := range []string{"a", "b"} {
		if err := b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: who, Attempt: who + "-1"}); err != nil {
			t.Fatal(err)
		}
	}
	// Its sweep may have deleted the expired record first: then it inserts.
	if outcome, holder := previousAcquire(t, ctx, b, prev, sharedReq(key, "old", 1)); (outcome != outcomeTakeover && outcome != outcomeInserted) || holder != "old" {
		t.Fatalf("previous acquire of the free name = outcome %d, holder %q; want granted", outcome, holder)
	}
	if g, err := b.Acquire(ctx, sharedReq(key, "c", 2)); err != nil || g.Acquired || g.HeldLimit != 1 || g.Holder != "old" {
		t.Fatalf("shared acquire over the previous version's holding = %+v, %v", g, err)
	}
}

// TestRealServerSharedRenewBatch: one batch renews exclusive and shared
// holdings together, refuses a stale one, and extends the shared name's
// record with its holdings.
func TestRealServerSharedRenewBatch(t *testing.T) {
	b, db, n := newRealBackend(t)
	ctx := realCtx(t)
	ga := mustAcquire(t, ctx, b, sharedReq("s", "a", 2))
	gb := mustAcquire(t, ctx, b, sharedReq("s", "b", 2))
	gx := mustAcquire(t, ctx, b, sharedReq("x", "x", 1))
	rs := []backend.RenewRequest{
		{Key: "s", Owner: "a", Attempt: "a-1", Token: ga.Token, TTL: 3 * time.Minute},
		{Key: "x", Owner: "x", Attempt: "x-1", Token: gx.Token, TTL: 3 * time.Minute},
		{Key: "s", Owner: "b", Attempt: "b-1", Token: gb.Token + 100, TTL: 3 * time.Minute},
		{Key: "s", Owner: "b", Attempt: "b-1", Token: gb.Token, TTL: 2 * time.Minute},
	}
	res, err := b.RenewBatch(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint64{ga.Token, gx.Token, 0, gb.Token} {
		switch {
		case want == 0 && !errors.Is(res[i].Err, backend.ErrNotHeld):
			t.Errorf("renewal %d = %+v, want ErrNotHeld", i, res[i])
		case want != 0 && (res[i].Err != nil || res[i].Grant.Token != want || !res[i].Grant.ExpiresAt.After(ga.ExpiresAt)):
			t.Errorf("renewal %d = %+v, want token %d renewed", i, res[i], want)
		}
	}
	var left int64
	if err := db.QueryRowContext(ctx, "SELECT DATEDIFF_BIG(SECOND, SYSDATETIMEOFFSET(), ExpiresAtUtc) FROM "+n.tableQ+" WHERE LeaseName = N's'").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left < 170 {
		t.Errorf("the record ends in %d s, before its holding renewed for 3 minutes", left)
	}
	g, err := b.Renew(ctx, backend.RenewRequest{Key: "s", Owner: "b", Attempt: "b-1", Token: gb.Token, TTL: time.Minute})
	if err != nil || g.Token != gb.Token {
		t.Fatalf("single renew of a shared holding = %+v, %v", g, err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "s", Owner: "a", Attempt: "b-1", Token: gb.Token, TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("renew by the wrong owner = %v, want ErrNotHeld", err)
	}
}

// TestRealServerSharedOneReleaseOneHandOff: a release of a full name hands
// its one slot to the head waiter of the name's limit (with a new token),
// and a revoke hands on the same way.
func TestRealServerSharedOneReleaseOneHandOff(t *testing.T) {
	b, _, _ := newRealBackend(t)
	ctx := realCtx(t)
	const key = "q"
	ga := mustAcquire(t, ctx, b, sharedReq(key, "a", 2))
	gb := mustAcquire(t, ctx, b, sharedReq(key, "b", 2))
	wait := func(who string) backend.AcquireRequest {
		r := sharedReq(key, who, 2)
		r.Wait, r.Queue = true, backend.QueueRequest{EntryTTL: time.Minute, Pickup: 30 * time.Second}
		return r
	}
	for _, who := range []string{"w1", "w2"} {
		if g, err := b.Acquire(ctx, wait(who)); err != nil || g.Acquired || !g.Queued || g.Holder != "a" {
			t.Fatalf("waiter %s = %+v, %v; want queued behind a", who, g, err)
		}
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "a", Attempt: "a-1", Token: ga.Token}); err != nil {
		t.Fatal(err)
	}
	hs, err := b.Holders(ctx, key)
	if err != nil || len(hs) != 2 || hs[0].Owner != "b" || hs[1].Owner != "w1" || hs[1].Token <= gb.Token {
		t.Fatalf("Holders after one release = %+v, %v; want b and w1 (handed on)", hs, err)
	}
	if g, err := b.Acquire(ctx, sharedReq(key, "late", 2)); err != nil || g.Acquired {
		t.Fatalf("newcomer = %+v, %v; want refused", g, err)
	}
	h, removed, err := b.Revoke(ctx, key, gb.Token)
	if err != nil || !removed || h.Owner != "b" || h.Limit != 2 {
		t.Fatalf("Revoke = %+v, %v, %v", h, removed, err)
	}
	hs, err = b.Holders(ctx, key)
	if err != nil || len(hs) != 2 || hs[0].Owner != "w1" || hs[1].Owner != "w2" {
		t.Fatalf("Holders after the revoke = %+v, %v; want w1 and w2", hs, err)
	}
	g, err := b.Acquire(ctx, wait("w2"))
	if err != nil || !g.Acquired || g.Token != hs[1].Token {
		t.Fatalf("w2 picks up = %+v, %v; want its handed holding", g, err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: key, Owner: "b", Attempt: "b-1", Token: gb.Token, TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("revoked holder's renew = %v, want ErrNotHeld", err)
	}
}

// TestRealServerSharedRenewBatchTrailingSpaces: one batch renews the
// holdings of "s" and "s " (names of limit 2 that differ only by a trailing
// space); after their first expiry both records stand, so another owner's
// exclusive acquire of either is refused while the renewed holdings live.
func TestRealServerSharedRenewBatchTrailingSpaces(t *testing.T) {
	b, db, n := newRealBackend(t)
	ctx := realCtx(t)
	short := func(key string) backend.AcquireRequest {
		r := sharedReq(key, "a", 2)
		r.TTL = 2 * time.Second
		return r
	}
	gs := mustAcquire(t, ctx, b, short("s"))
	gsp := mustAcquire(t, ctx, b, short("s "))
	res, err := b.RenewBatch(ctx, []backend.RenewRequest{
		{Key: "s", Owner: "a", Attempt: "a-1", Token: gs.Token, TTL: time.Minute},
		{Key: "s ", Owner: "a", Attempt: "a-1", Token: gsp.Token, TTL: time.Minute},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("renew batch = %+v, %v", res, err)
	}
	// Waiting on the server's clock past the first expiry: nothing to signal.
	last := gs.ExpiresAt
	if gsp.ExpiresAt.After(last) {
		last = gsp.ExpiresAt
	}
	time.Sleep(time.Until(last) + 500*time.Millisecond)
	for _, key := range []string{"s", "s "} {
		if rec, ok := readRecord(t, ctx, db, n, key); !ok || !rec.live || rec.limit != 2 {
			t.Errorf("record of %q = %+v (present %t); want live, limit 2", key, rec, ok)
		}
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "b", Attempt: "b-1", TTL: time.Minute})
		if err != nil || g.Acquired || g.HeldLimit != 2 {
			t.Errorf("exclusive acquire of %q while a renewed shared holding lives = %+v, %v; want refused for limit 2", key, g, err)
		}
	}
}
