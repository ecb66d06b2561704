package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// queueReq is a QueueRequest whose entry and pickup window outlive the test.
func queueReq(notify string, poll uint64) backend.QueueRequest {
	return backend.QueueRequest{EntryTTL: live, Pickup: live, Notify: notify, Poll: poll}
}

// waitAs makes a waiting acquire as attempt, queued as q asks.
func waitAs(t testing.TB, b *Backend, key, owner, attempt string, q backend.QueueRequest) held {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: live, Wait: true, Queue: q})
	if err != nil {
		t.Fatalf("waiting Acquire(%q, %q, %q): %v", key, owner, attempt, err)
	}
	return held{Grant: g, key: key, owner: owner, attempt: attempt}
}

// mustQueue makes a new attempt wait for key and requires it to be queued.
func mustQueue(t testing.TB, b *Backend, key, owner string, q backend.QueueRequest) held {
	t.Helper()
	w := waitAs(t, b, key, owner, newAttempt(), q)
	if w.Acquired || !w.Queued {
		t.Fatalf("%s's waiting Acquire(%q) = %+v, want a refusal with Queued", owner, key, w.Grant)
	}
	return w
}

// queueEntries returns the attempts of key's queue entries, live or not, in
// queue order.
func queueEntries(t testing.TB, e *testEnv, key string) []string {
	t.Helper()
	var attempts []string
	if err := e.admin.QueryRow(ctxT(t), "SELECT coalesce(array_agg(attempt ORDER BY place), '{}') FROM "+
		newNames(e.schema, e.table).queue+" WHERE lease_name = $1", key).Scan(&attempts); err != nil {
		t.Fatalf("read the queue of %q: %v", key, err)
	}
	return attempts
}

// handOffs starts WatchHandOffs on b for addr and returns the notices, a
// channel signalled at each LISTEN in place, and a stop function.
func handOffs(t *testing.T, b *Backend, addr string) (notices <-chan backend.HandOff, ready <-chan struct{}, stop func()) {
	t.Helper()
	n := make(chan backend.HandOff, 16)
	r := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.WatchHandOffs(ctx, addr, func(h backend.HandOff) { n <- h }, func() {
			select {
			case r <- struct{}{}:
			default: // nobody counts that many reconnects
			}
		})
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := await(t, done, "WatchHandOffs to return"); err != nil {
			t.Errorf("WatchHandOffs returned %v after cancel, want nil", err)
		}
	}
	t.Cleanup(stop)
	return n, r, stop
}

// A table of the version before the queue (the lease table with attempt and
// waited, its sequence and index, as that version's schema.go wrote them), with
// a live holding in it, gets the queue's table and index from EnsureSchema.
// The holding survives, refuses waiters, who are queued, and its release
// hands it to the first of them.
func TestEnsureSchemaAddsTheQueue(t *testing.T) {
	admin := newPool(t, "lh_admin")
	ctx := ctxT(t)
	schema, table := randomName("lh_test_"), DefaultTable
	n := newNames(schema, table)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+n.schema+" CASCADE") })
	for _, stmt := range []string{
		"CREATE SCHEMA IF NOT EXISTS " + n.schema,
		"CREATE SEQUENCE IF NOT EXISTS " + n.sequence + " AS bigint MINVALUE 1 START WITH 1 CACHE 1 NO CYCLE",
		"CREATE TABLE IF NOT EXISTS " + n.table + ` (
    lease_name        text COLLATE "C" NOT NULL PRIMARY KEY CHECK (char_length(lease_name) BETWEEN 1 AND 200),
    owner_instance_id text COLLATE "C" NOT NULL CHECK (char_length(owner_instance_id) BETWEEN 1 AND 200),
    attempt           text COLLATE "C" NOT NULL CHECK (octet_length(attempt) <= 64),
    fencing_token     bigint NOT NULL CHECK (fencing_token > 0),
    acquired_at       timestamptz NOT NULL,
    renewed_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    metadata          text NOT NULL DEFAULT '' CHECK (octet_length(metadata) <= 4000),
    waited            boolean NOT NULL DEFAULT false
)`,
		"CREATE INDEX IF NOT EXISTS " + n.index + " ON " + n.table + " (expires_at)",
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("previous DDL: %v", err)
		}
	}
	// A holding as the previous version made it.
	var oldTok int64
	if err := admin.QueryRow(ctx, "INSERT INTO "+n.table+` (lease_name, owner_instance_id, attempt, fencing_token, acquired_at, renewed_at, expires_at)
		SELECT 'k', 'a', 'old', nextval($1::regclass), now(), now(), now() + interval '1 hour' RETURNING fencing_token`, n.sequence).Scan(&oldTok); err != nil {
		t.Fatal(err)
	}

	for range 2 { // the upgrade, then a call that finds nothing to do
		if err := EnsureSchema(ctx, admin, schema, table); err != nil {
			t.Fatalf("EnsureSchema on the previous table: %v", err)
		}
	}
	var kinds string
	if err := admin.QueryRow(ctx, `SELECT string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname)
		FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = $1 AND c.relname IN ($2, $3)`,
		schema, table+queueSuffix, table+queueIndexSuffix).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if want := table + queueSuffix + ":r," + table + queueIndexSuffix + ":i"; kinds != want {
		t.Fatalf("queue objects after the upgrade: %q, want %q", kinds, want)
	}

	b, err := New(admin, WithTable(schema, table))
	if err != nil {
		t.Fatal(err)
	}
	w := waitAs(t, b, "k", "w", newAttempt(), queueReq("", 0))
	if w.Acquired || !w.Queued || w.Holder != "a" || w.HolderToken != uint64(oldTok) {
		t.Fatalf("a waiter on the old holding = %+v, want a queued refusal by a's token %d", w.Grant, oldTok)
	}
	// The old holding is revoked (its attempt is not this version's to
	// release) and handed on to the waiter.
	if _, removed, err := b.Revoke(ctx, "k", uint64(oldTok)); err != nil || !removed {
		t.Fatalf("Revoke = %v, %v", removed, err)
	}
	if h, ok, err := b.Inspect(ctx, "k"); err != nil || !ok || h.Owner != "w" || h.Token <= uint64(oldTok) {
		t.Fatalf("after the revoke: %+v, %v, %v; want w's hand-off above %d", h, ok, err, oldTok)
	}
}

// A batch answers queue calls exactly as the single calls do: the same
// sequence is made once call by call on one key and once as one Batch on
// another, and the answers agree; the batch's hand-off is announced.
func TestBatchAnswersQueueCallsLikeSingleCalls(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	addr := newAttempt()
	notices, ready, _ := handOffs(t, b, addr)
	await(t, ready, "the hand-off watch")

	// sequence returns the calls on key; attempts are fresh per sequence.
	sequence := func(key string) []backend.Call {
		a, w1, w2, x, p := newAttempt(), newAttempt(), newAttempt(), newAttempt(), newAttempt()
		acq := func(owner, attempt string, wait bool, q backend.QueueRequest) backend.Call {
			return backend.Call{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: live, Wait: wait, Queue: q}}
		}
		rel := func(owner, attempt string) backend.Call {
			return backend.Call{Op: backend.OpRelease, Release: backend.ReleaseRequest{Key: key, Owner: owner, Attempt: attempt}}
		}
		return []backend.Call{
			acq("a", a, false, backend.QueueRequest{}),                // 0: granted
			acq("w1", w1, true, queueReq(addr, 1)),                    // 1: refused, queued
			acq("w2", w2, true, queueReq("", 1)),                      // 2: refused, queued
			acq("w1", w1, true, queueReq(addr, 2)),                    // 3: refused, keeps its place
			acq("p", p, true, backend.QueueRequest{}),                 // 4: refused, polls
			acq("x", x, true, queueReq("", 1)),                        // 5: refused, queued
			rel("x", x),                                               // 6: x leaves
			rel("a", a),                                               // 7: handed to w1
			acq("n", newAttempt(), false, backend.QueueRequest{}),     // 8: refused by w1
			acq("w2", w2, true, queueReq("", 2)),                      // 9: refused by w1, queued
			acq("w1", w1, true, queueReq(addr, 3)),                    // 10: picked up
			rel("w1", w1),                                             // 11: handed to w2
			acq("w2", w2, true, queueReq("", 3)),                      // 12: picked up
			rel("w2", w2),                                             // 13: free
			acq("later", newAttempt(), false, backend.QueueRequest{}), // 14: granted
		}
	}
	single := sequence("single")
	for i := range single {
		c := &single[i]
		switch c.Op {
		case backend.OpAcquire:
			c.Grant, c.Err = b.Acquire(ctxT(t), c.Acquire)
		case backend.OpRelease:
			c.Err = b.Release(ctxT(t), c.Release)
		}
	}
	// The single sequence's hand-off to w1 was announced too.
	if h := await(t, notices, "the single calls' hand-off"); h.Key != "single" || h.Poll != 2 {
		t.Fatalf("notice %+v, want one for key single, poll 2", h)
	}
	batched := sequence("batch")
	b.Batch(ctxT(t), batched)

	// answer is what a call's answer says, apart from the key's own tokens
	// and times.
	type answer struct {
		acquired, queued, hasToken, holderHasToken bool
		holder                                     string
		err                                        error
	}
	answerOf := func(c backend.Call) answer {
		return answer{c.Grant.Acquired, c.Grant.Queued, c.Grant.Token > 0, c.Grant.HolderToken > 0, c.Grant.Holder, c.Err}
	}
	want := []answer{
		{acquired: true, hasToken: true},
		{queued: true, holder: "a", holderHasToken: true},
		{queued: true, holder: "a", holderHasToken: true},
		{queued: true, holder: "a", holderHasToken: true},
		{holder: "a", holderHasToken: true},
		{queued: true, holder: "a", holderHasToken: true},
		{},
		{},
		{holder: "w1", holderHasToken: true},
		{queued: true, holder: "w1", holderHasToken: true},
		{acquired: true, hasToken: true},
		{},
		{acquired: true, hasToken: true},
		{},
		{acquired: true, hasToken: true},
	}
	for i := range want {
		if got := answerOf(single[i]); got != want[i] {
			t.Errorf("single call %d (%v) = %+v, want %+v", i, single[i].Op, got, want[i])
		}
		if got := answerOf(batched[i]); got != want[i] {
			t.Errorf("batched call %d (%v) = %+v, want %+v", i, batched[i].Op, got, want[i])
		}
	}
	for _, calls := range [][]backend.Call{single, batched} {
		// The hand-off's token is w1's; w2's comes after it.
		if calls[8].Grant.HolderToken != calls[10].Grant.Token || calls[10].Grant.Token <= calls[0].Grant.Token ||
			calls[12].Grant.Token <= calls[10].Grant.Token || calls[14].Grant.Token <= calls[12].Grant.Token {
			t.Errorf("%s: tokens a %d, hand-off %d, w1 %d, w2 %d, later %d; want the hand-off's for w1, increasing",
				calls[0].Acquire.Key, calls[0].Grant.Token, calls[8].Grant.HolderToken, calls[10].Grant.Token, calls[12].Grant.Token, calls[14].Grant.Token)
		}
	}
	h := await(t, notices, "the batch's hand-off")
	if h.Key != "batch" || h.Owner != "w1" || h.Attempt != batched[1].Acquire.Attempt || h.Token != batched[10].Grant.Token || h.Poll != 2 {
		t.Fatalf("notice %+v, want w1's hand-off of batch with token %d, poll 2", h, batched[10].Grant.Token)
	}
	for _, k := range []string{"single", "batch"} {
		if q := queueEntries(t, e, k); len(q) != 0 {
			t.Errorf("queue of %s after the sequence: %v, want empty", k, q)
		}
	}
}

// The hand-off notice on a real server: names and owners of any text
// arrive as spelled, the poll number keeps its 64 bits, the entry's metadata
// and pickup window make the new holding, a hand-off is not announced as a
// release, and the watch says it is ready again after a reconnect. Revoke
// hands on with a notice too.
func TestHandOffNotice(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	addr := newAttempt()
	notices, ready, _ := handOffs(t, b, addr)
	releases, listening, _ := watching(t, b)
	await(t, ready, "the hand-off watch")
	await(t, listening, "the release watch")

	key, owner := "a key 🙂\n'\"; --", "an owner 🙂 4 x"
	a := mustAcquire(t, b, key, "a", live)
	markWaited(t, b, key) // a poller: the mark goes with the hand-off
	q := backend.QueueRequest{EntryTTL: live, Pickup: time.Minute, Notify: addr, Poll: math.MaxUint64 - 1}
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: "w-1", TTL: live, Metadata: "md 🙂", Wait: true, Queue: q})
	if err != nil || g.Acquired || !g.Queued {
		t.Fatalf("queued Acquire = %+v, %v", g, err)
	}
	before := serverNow(t, e)
	if err := b.Release(ctxT(t), a.releaseReq()); err != nil {
		t.Fatal(err)
	}
	after := serverNow(t, e)
	h := await(t, notices, "the hand-off")
	if h.Key != key || h.Owner != owner || h.Attempt != "w-1" || h.Token <= a.Token || h.Poll != math.MaxUint64-1 {
		t.Fatalf("notice %+v, want key %q, owner %q, attempt w-1, a token above %d, poll %d", h, key, owner, a.Token, uint64(math.MaxUint64-1))
	}
	in, ok, err := b.Inspect(ctxT(t), key)
	if err != nil || !ok || in.Owner != owner || in.Token != h.Token || in.Metadata != "md 🙂" {
		t.Fatalf("the handed holding: %+v, %v, %v", in, ok, err)
	}
	grantedBetween(t, "the hand-off", in.ExpiresAt, time.Minute, before, after)

	// The hand-off was not announced as a release (notifications arrive in
	// commit order: the marker released after it is heard first), but its
	// mark stayed: the new holder's release is announced.
	m := mustAcquire(t, b, "marker", "a", live)
	markWaited(t, b, "marker")
	if err := b.Release(ctxT(t), m.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if got := await(t, releases, "the marker's release"); got != "marker" {
		t.Fatalf("release watch reported %q first, want marker: the hand-off was announced as a release", got)
	}
	w := held{Grant: backend.Grant{Acquired: true, Token: h.Token}, key: key, owner: owner, attempt: "w-1"}
	if err := b.Release(ctxT(t), w.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if got := await(t, releases, "the release after the hand-off"); got != key {
		t.Fatalf("release watch reported %q, want %q", got, key)
	}

	// After a reconnect the watch says it is ready again, and hears a
	// revoke's hand-off.
	if n := e.terminate(t); n < 2 {
		t.Fatalf("terminated %d server processes, want both watches'", n)
	}
	await(t, ready, "the hand-off watch after the terminate")
	r := mustAcquire(t, b, "revoked", "a", live)
	v := mustQueue(t, b, "revoked", "v", queueReq(addr, 7))
	if _, removed, err := b.Revoke(ctxT(t), "revoked", 0); err != nil || !removed {
		t.Fatalf("Revoke = %v, %v", removed, err)
	}
	if h := await(t, notices, "the revoke's hand-off"); h.Key != "revoked" || h.Attempt != v.attempt || h.Token <= r.Token || h.Poll != 7 {
		t.Fatalf("notice %+v, want v's hand-off of revoked, poll 7", h)
	}
	select {
	case h := <-notices:
		t.Fatalf("an extra notice %+v", h)
	default:
	}

	if err := b.WatchHandOffs(ctxT(t), "no spaces allowed", func(backend.HandOff) {}, nil); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("WatchHandOffs with a bad address = %v, want ErrInvalidRequest", err)
	}
}

// Hand-off channels are valid, short identifiers of their own per table and
// address.
func TestHandOffChannel(t *testing.T) {
	b1, err := New(poolStub(t), WithTable("s", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	b2, err := New(poolStub(t), WithTable("s", "t2"))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("~", backend.MaxAddressBytes)
	seen := map[string]bool{}
	for _, c := range []string{b1.handOffChannel("a"), b1.handOffChannel("b"), b1.handOffChannel(long), b2.handOffChannel("a")} {
		if len(c) > maxIdentBytes || !strings.HasPrefix(c, "leasehold_h_") || seen[c] {
			t.Errorf("channel %q: too long, misnamed or shared", c)
		}
		seen[c] = true
	}
}

// Payloads that are not in the documented format are refused.
func TestParseHandOff(t *testing.T) {
	h, err := parseHandOff("1 42 -2 addr att 5 o w n k e y ")
	if err != nil || h.address != "addr" || h.Token != 42 || h.Poll != math.MaxUint64-1 || h.Attempt != "att" || h.Owner != "o w n" || h.Key != "k e y " {
		t.Fatalf("parseHandOff = %+v, %v", h, err)
	}
	for _, p := range []string{
		"", "1", "2 42 1 addr att 1 o k", "1 x 1 addr att 1 o k", "1 0 1 addr att 1 o k", "1 42 x addr att 1 o k",
		"1 42 1 addr att x o k", "1 42 1 addr att 0 o k", "1 42 1 addr att 1 o", "1 42 1 addr att 2 o k", "1 42 1 addr att 9 o k",
	} {
		if _, err := parseHandOff(p); !errors.Is(err, errHandOffPayload) {
			t.Errorf("parseHandOff(%q) = %v, want errHandOffPayload", p, err)
		}
	}
}

// An attempt whose entry expired rejoins at the tail when it asks again: the
// entry, still in the table, is renewed with a new place.
func TestExpiredEntryRejoinsAtTheTail(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	a := mustAcquire(t, b, "k", "a", live)
	const entryTTL = 300 * time.Millisecond
	late := mustQueue(t, b, "k", "late", backend.QueueRequest{EntryTTL: entryTTL, Pickup: live})
	w := mustQueue(t, b, "k", "w", queueReq("", 0))
	if q := queueEntries(t, e, "k"); len(q) != 2 || q[0] != late.attempt {
		t.Fatalf("queue %v, want late's entry, then w's", q)
	}
	waitServer(t, e.admin, entryTTL) // entry expiry has no signal: let the server's clock pass it
	if g := waitAs(t, b, "k", late.owner, late.attempt, queueReq("", 0)); g.Acquired || !g.Queued {
		t.Fatalf("the late attempt asking again = %+v, want queued", g.Grant)
	}
	if q := queueEntries(t, e, "k"); len(q) != 2 || q[0] != w.attempt || q[1] != late.attempt {
		t.Fatalf("queue %v, want w's entry, then late's", q)
	}
	if err := b.Release(ctxT(t), a.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := b.Inspect(ctxT(t), "k"); err != nil || !ok || h.Owner != "w" {
		t.Fatalf("after the release: %+v, %v, %v; want w's hand-off", h, ok, err)
	}
}

// The sweep removes expired queue entries of any name, and no live one.
func TestSweepRemovesExpiredQueueEntries(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 100))
	mustAcquire(t, b, "k", "a", live)
	// The live entry first: an acquire on k would drop the expired ones.
	w := mustQueue(t, b, "k", "w", queueReq("", 0))
	for range 3 {
		mustQueue(t, b, "k", "gone", backend.QueueRequest{EntryTTL: 20 * time.Millisecond, Pickup: live})
	}
	waitServer(t, e.admin, 100*time.Millisecond) // entry expiry has no signal: let the server's clock pass it
	mustAcquire(t, b, "other", "a", live)        // sweeps first
	if q := queueEntries(t, e, "k"); len(q) != 1 || q[0] != w.attempt {
		t.Fatalf("queue after the sweep: %v, want only w's live entry", q)
	}
}

// Contenders that queue and poll, all at once, each get the name in turn:
// no statement fails (the queue's statements touch each row once), one holds
// at a time, and the tokens of the grants increase.
func TestQueueUnderContention(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 10))
	const workers, rounds = 6, 3
	var (
		mu      sync.Mutex
		holding bool
		tokens  []uint64
	)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", i)
			for range rounds {
				attempt := newAttempt()
				for poll := uint64(1); ; poll++ {
					g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: "k", Owner: owner, Attempt: attempt, TTL: live, Wait: true,
						Queue: backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute, Poll: poll}})
					if err != nil {
						errs <- err
						return
					}
					if !g.Acquired {
						// The contenders poll: that is what is under test,
						// not a wait for a signal.
						time.Sleep(2 * time.Millisecond)
						continue
					}
					mu.Lock()
					if holding {
						mu.Unlock()
						errs <- fmt.Errorf("%s granted token %d while another holds", owner, g.Token)
						return
					}
					holding = true
					tokens = append(tokens, g.Token)
					mu.Unlock()
					// Work while holding: a renewal, which must find the
					// holding still there.
					if _, err := b.Renew(ctxT(t), backend.RenewRequest{Key: "k", Owner: owner, Attempt: attempt, Token: g.Token, TTL: live}); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					holding = false // before the release: the next grant may come at its commit
					mu.Unlock()
					if err := b.Release(ctxT(t), backend.ReleaseRequest{Key: "k", Owner: owner, Attempt: attempt, Token: g.Token}); err != nil {
						errs <- err
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(tokens) != workers*rounds {
		t.Fatalf("%d grants, want %d", len(tokens), workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens %v do not increase", tokens)
		}
	}
}
