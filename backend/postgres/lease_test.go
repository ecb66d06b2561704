package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// live is the TTL of holdings that must stay live for the whole test: far
// beyond any test's run time, so that no load makes them expire early.
const live = time.Hour

// held is a grant with the request that made it, so that it can be renewed,
// released and checked by the holding it names.
type held struct {
	backend.Grant
	key, owner, attempt string
}

func (h held) renewReq(ttl time.Duration) backend.RenewRequest {
	return backend.RenewRequest{Key: h.key, Owner: h.owner, Attempt: h.attempt, Token: h.Token, TTL: ttl}
}

func (h held) releaseReq() backend.ReleaseRequest {
	return backend.ReleaseRequest{Key: h.key, Owner: h.owner, Attempt: h.attempt, Token: h.Token}
}

// newAttempt returns a fresh attempt identity, as the engine makes them.
func newAttempt() string { return randomName("t") }

// acquireAs makes one acquire as attempt (a retry when it is not new).
func acquireAs(t testing.TB, b *Backend, key, owner, attempt string, ttl time.Duration) held {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%q, %q, %q): %v", key, owner, attempt, err)
	}
	return held{Grant: g, key: key, owner: owner, attempt: attempt}
}

// mustAcquire makes a new attempt and requires the grant.
func mustAcquire(t testing.TB, b *Backend, key, owner string, ttl time.Duration) held {
	t.Helper()
	h := acquireAs(t, b, key, owner, newAttempt(), ttl)
	if !h.Acquired || h.Token == 0 {
		t.Fatalf("Acquire(%q, %q): %+v, want a grant", key, owner, h.Grant)
	}
	return h
}

// serverNow reads the server's clock (the one expiries are decided by).
func serverNow(t testing.TB, e *testEnv) time.Time {
	t.Helper()
	var now time.Time
	if err := e.admin.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatalf("read the server clock: %v", err)
	}
	return now
}

// grantedBetween checks that h was granted (or renewed) for ttl at a server
// time between before and after: ExpiresAt - ttl is that time.
func grantedBetween(t testing.TB, what string, expires time.Time, ttl time.Duration, before, after time.Time) {
	t.Helper()
	at := expires.Add(-ttl)
	if at.Before(before) || at.After(after) {
		t.Errorf("%s: ExpiresAt %v is not %v after a server time in [%v, %v]", what, expires, ttl, before, after)
	}
}

// mustBeBusyBy checks that the refusal h names the holding by, and the time
// it had left as the server measured it: HolderExpiresAt - HolderExpiresIn is
// the server's clock when it answered, between before and after.
func mustBeBusyBy(t testing.TB, h, by held, before, after time.Time) {
	t.Helper()
	if h.Acquired || h.Token != 0 {
		t.Fatalf("%s/%s got %+v while %s/%s holds", h.owner, h.attempt, h.Grant, by.owner, by.attempt)
	}
	if h.Holder != by.owner || h.HolderToken != by.Token || !h.HolderExpiresAt.Equal(by.ExpiresAt) {
		t.Errorf("refusal = %+v, want holder %q, token %d, until %v", h.Grant, by.owner, by.Token, by.ExpiresAt)
	}
	answered := h.HolderExpiresAt.Add(-h.HolderExpiresIn)
	if h.HolderExpiresIn <= 0 || answered.Before(before) || answered.After(after) {
		t.Errorf("refusal: HolderExpiresIn %v puts the answer at %v, outside [%v, %v]", h.HolderExpiresIn, answered, before, after)
	}
}

func TestAcquireFreeThenBusy(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)

	before := serverNow(t, e)
	g := mustAcquire(t, b, "job", "a", time.Minute)
	grantedBetween(t, "grant", g.ExpiresAt, time.Minute, before, serverNow(t, e))

	// Another owner, and the same owner's new attempt, are both refused.
	for _, owner := range []string{"b", "a"} {
		before := serverNow(t, e)
		busy := acquireAs(t, b, "job", owner, newAttempt(), time.Minute)
		mustBeBusyBy(t, busy, g, before, serverNow(t, e))
	}
}

// A retry of the same attempt (its answer was lost) refreshes the holding:
// same token, new expiry and metadata.
func TestRetryOfTheSameAttemptRefreshes(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	g1 := mustAcquire(t, b, "job", "a", live)
	g2, err := b.Acquire(ctx, backend.AcquireRequest{Key: "job", Owner: "a", Attempt: g1.attempt, TTL: 2 * live, Metadata: "second"})
	if err != nil || !g2.Acquired || g2.Token != g1.Token {
		t.Fatalf("retry = %+v, %v; want a grant with token %d", g2, err, g1.Token)
	}
	if !g2.ExpiresAt.After(g1.ExpiresAt) {
		t.Fatalf("the retry did not extend the expiry: %v then %v", g1.ExpiresAt, g2.ExpiresAt)
	}
	var meta string
	if err := e.admin.QueryRow(ctx, "SELECT metadata FROM "+b.names.table+" WHERE lease_name = 'job'").Scan(&meta); err != nil || meta != "second" {
		t.Fatalf("metadata after the retry = %q, %v", meta, err)
	}
	// The same attempt string from another owner is not the same holding.
	before := serverNow(t, e)
	busy := acquireAs(t, b, "job", "b", g1.attempt, live)
	g1.Grant = backend.Grant{Acquired: true, Token: g2.Token, ExpiresAt: g2.ExpiresAt}
	mustBeBusyBy(t, busy, g1, before, serverNow(t, e))
}

func TestTokensIncreaseAcrossReleaseExpiryAndTakeover(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0)) // keep expired rows: exercise the takeover branch
	ctx := ctxT(t)

	g1 := mustAcquire(t, b, "k", "a", live)
	if err := b.Release(ctx, g1.releaseReq()); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "a", 20*time.Millisecond) // after release, same owner
	waitPast(t, e.admin, g2.ExpiresAt)
	g3 := acquireAs(t, b, "k", "a", g2.attempt, 20*time.Millisecond) // its own attempt, expired: a new grant
	if !g3.Acquired {
		t.Fatalf("the expired attempt's retry = %+v, want a new grant", g3.Grant)
	}
	waitPast(t, e.admin, g3.ExpiresAt)
	g4 := mustAcquire(t, b, "k", "b", live) // takeover of an expired row
	if !(g1.Token < g2.Token && g2.Token < g3.Token && g3.Token < g4.Token) {
		t.Fatalf("tokens not strictly increasing: %d %d %d %d", g1.Token, g2.Token, g3.Token, g4.Token)
	}
	if e.rows(t) != 1 {
		t.Fatalf("want one row for one name, have %d", e.rows(t))
	}
}

func TestRenewExtendsAndKeepsToken(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "a", live)
	before := serverNow(t, e)
	r, err := b.Renew(ctx, g.renewReq(2*live))
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if !r.Acquired || r.Token != g.Token {
		t.Fatalf("Renew = %+v, want token %d", r, g.Token)
	}
	grantedBetween(t, "renewal", r.ExpiresAt, 2*live, before, serverNow(t, e))
	busy := acquireAs(t, b, "k", "b", newAttempt(), time.Second)
	if busy.Acquired || !busy.HolderExpiresAt.Equal(r.ExpiresAt) || busy.HolderToken != g.Token {
		t.Fatalf("Acquire by b after renew = %+v", busy.Grant)
	}
}

func TestRenewNotHeld(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "a", live)

	for _, r := range []backend.RenewRequest{
		{Key: "k", Owner: "b", Attempt: g.attempt, Token: g.Token, TTL: time.Minute},     // foreign owner
		{Key: "k", Owner: "a", Attempt: newAttempt(), Token: g.Token, TTL: time.Minute},  // same owner, another attempt
		{Key: "k", Owner: "a", Attempt: g.attempt, Token: g.Token + 1, TTL: time.Minute}, // stale or forged token
		{Key: "k", Owner: "a", Attempt: g.attempt, Token: 1 << 63, TTL: time.Minute},     // beyond bigint
		{Key: "other", Owner: "a", Attempt: g.attempt, Token: g.Token, TTL: time.Minute}, // never held
	} {
		if _, err := b.Renew(ctx, r); !errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("Renew(%+v) = %v, want ErrNotHeld", r, err)
		}
	}

	short := mustAcquire(t, b, "short", "a", 20*time.Millisecond)
	waitPast(t, e.admin, short.ExpiresAt)
	if _, err := b.Renew(ctx, short.renewReq(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew after expiry = %v, want ErrNotHeld", err)
	}

	if err := b.Release(ctx, g.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Renew(ctx, g.renewReq(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew after release = %v, want ErrNotHeld", err)
	}
}

func TestReleaseIsFilteredAndIdempotent(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "a", live)

	// A foreign owner, another attempt of the same owner, or a stale token
	// releases nothing.
	for _, r := range []backend.ReleaseRequest{
		{Key: "k", Owner: "b", Attempt: g.attempt, Token: g.Token},
		{Key: "k", Owner: "b", Attempt: g.attempt, Token: 0},
		{Key: "k", Owner: "a", Attempt: newAttempt(), Token: g.Token},
		{Key: "k", Owner: "a", Attempt: newAttempt(), Token: 0},
		{Key: "k", Owner: "a", Attempt: g.attempt, Token: g.Token + 1},
		{Key: "k", Owner: "a", Attempt: g.attempt, Token: 1 << 63},
	} {
		if err := b.Release(ctx, r); err != nil {
			t.Fatalf("Release(%+v): %v", r, err)
		}
		if busy := acquireAs(t, b, "k", "b", newAttempt(), live); busy.Acquired {
			t.Fatalf("Release(%+v) freed a's lease", r)
		}
	}
	for range 2 {
		if err := b.Release(ctx, g.releaseReq()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	mustAcquire(t, b, "k", "b", live)
}

// Token 0 releases the holding of that attempt, whatever its token, and
// nothing else: not the same owner's holding made by another attempt.
func TestReleaseTokenZeroMatchesOnlyItsAttempt(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "a", live)
	anyToken := g.releaseReq()
	anyToken.Token = 0
	if err := b.Release(ctx, anyToken); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "a", live)          // free again: a's next attempt gets it
	if err := b.Release(ctx, anyToken); err != nil { // the first attempt's late cleanup
		t.Fatal(err)
	}
	if _, err := b.Renew(ctx, g2.renewReq(live)); err != nil {
		t.Fatalf("the newer holding after the old attempt's token-0 release: %v", err)
	}
}

func TestInvalidRequestsTouchNothing(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	long := strings.Repeat("é", backend.MaxKeyRunes+1)
	const at = "t1"
	acquires := []backend.AcquireRequest{
		{Key: "", Owner: "a", Attempt: at, TTL: time.Second},
		{Key: "  \n", Owner: "a", Attempt: at, TTL: time.Second},
		{Key: "k\x00", Owner: "a", Attempt: at, TTL: time.Second},
		{Key: "\xff", Owner: "a", Attempt: at, TTL: time.Second},
		{Key: long, Owner: "a", Attempt: at, TTL: time.Second},
		{Key: "k", Owner: "", Attempt: at, TTL: time.Second},
		{Key: "k", Owner: "a", Attempt: "", TTL: time.Second},
		{Key: "k", Owner: "a", Attempt: "has space", TTL: time.Second},
		{Key: "k", Owner: "a", Attempt: "é", TTL: time.Second},
		{Key: "k", Owner: "a", Attempt: strings.Repeat("x", backend.MaxAttemptBytes+1), TTL: time.Second},
		{Key: "k", Owner: "a", Attempt: at, TTL: 0},
		{Key: "k", Owner: "a", Attempt: at, TTL: backend.MaxTTL + 1},
		{Key: "k", Owner: "a", Attempt: at, TTL: time.Second, Metadata: strings.Repeat("x", backend.MaxMetadataBytes+1)},
		{Key: "k", Owner: "a", Attempt: at, TTL: time.Second, Metadata: "a\x00b"},
	}
	for _, r := range acquires {
		if _, err := b.Acquire(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Acquire(key %q, owner %q, attempt %q, ttl %v, %d bytes of metadata) = %v, want ErrInvalidRequest",
				r.Key, r.Owner, r.Attempt, r.TTL, len(r.Metadata), err)
		}
	}
	for _, r := range []backend.RenewRequest{
		{Key: "k", Owner: "a", Attempt: at, Token: 0, TTL: time.Second},
		{Key: "k", Owner: "a", Attempt: "", Token: 1, TTL: time.Second},
	} {
		if _, err := b.Renew(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Renew(%+v) = %v, want ErrInvalidRequest", r, err)
		}
	}
	for _, r := range []backend.ReleaseRequest{
		{Key: "k\x00", Owner: "a", Attempt: at},
		{Key: "k", Owner: "a", Attempt: ""},
	} {
		if err := b.Release(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Release(%+v) = %v, want ErrInvalidRequest", r, err)
		}
	}
	if n := e.rows(t); n != 0 {
		t.Fatalf("invalid requests wrote %d rows", n)
	}
}

func TestLimitsAccepted(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	key := strings.Repeat("日", backend.MaxKeyRunes) // 600 bytes, 200 runes
	owner := strings.Repeat("ö", backend.MaxKeyRunes)
	meta := strings.Repeat("€", backend.MaxMetadataBytes/3) // 3999 bytes
	attempt := strings.Repeat("~", backend.MaxAttemptBytes)
	before := serverNow(t, e)
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: backend.MaxTTL, Metadata: meta})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire at the limits = %+v, %v", g, err)
	}
	grantedBetween(t, "MaxTTL grant", g.ExpiresAt, backend.MaxTTL, before, serverNow(t, e))
	var stored, storedAttempt string
	if err := e.admin.QueryRow(ctx, "SELECT metadata, attempt FROM "+b.names.table+" WHERE lease_name = $1", key).
		Scan(&stored, &storedAttempt); err != nil || stored != meta || storedAttempt != attempt {
		t.Fatalf("metadata or attempt not stored intact: %v", err)
	}
	g, err = b.Acquire(ctx, backend.AcquireRequest{Key: "tiny", Owner: owner, Attempt: "!", TTL: backend.MinTTL})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire with MinTTL = %+v, %v", g, err)
	}
}

// Names are stored and compared byte for byte: SQL and glob syntax is data,
// and no two distinct names share a row.
func TestKeysRoundTripAndNeverCollide(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	keys := []string{
		"x'; DROP TABLE lease.leases; --",
		`x"; DROP SCHEMA lease CASCADE; --`,
		"Foo", "foo", "FOO",
		"a b", "a  b", "a\nb", "a\tb", " lead", "trail ",
		"*", "?", "[a-z]", "{x}", "%", "_", "\\", "\\\\",
		"e\u0301", "\u00e9", // NFD and NFC: different bytes, different leases
		"/*", "*/", "$1", "::text",
	}
	tokens := map[uint64]string{}
	grants := map[string]held{}
	for _, k := range keys {
		g := mustAcquire(t, b, k, "a", live)
		if prev, dup := tokens[g.Token]; dup {
			t.Fatalf("keys %q and %q share token %d", prev, k, g.Token)
		}
		tokens[g.Token] = k
		grants[k] = g
	}
	if n := e.rows(t); n != len(keys) {
		t.Fatalf("%d keys made %d rows", len(keys), n)
	}
	for _, k := range keys {
		busy := acquireAs(t, b, k, "b", newAttempt(), live)
		if busy.Acquired || busy.Holder != "a" || busy.HolderToken != grants[k].Token {
			t.Fatalf("Acquire(%q) by b = %+v", k, busy.Grant)
		}
	}
	var stored []string
	rows, err := e.admin.Query(ctx, "SELECT lease_name FROM "+b.names.table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, s)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for _, s := range stored {
		if _, ok := grants[s]; !ok {
			t.Fatalf("stored name %q is not one of the keys", s)
		}
	}
	for _, k := range keys {
		r := grants[k].releaseReq()
		r.Token = 0
		if err := b.Release(ctx, r); err != nil {
			t.Fatalf("Release(%q): %v", k, err)
		}
	}
	if n := e.rows(t); n != 0 {
		t.Fatalf("%d rows left after releasing every key", n)
	}
}

// Many attempts race for one name, round after round, from different owners
// and from one owner: exactly one wins each round and the winners' tokens
// increase.
func TestConcurrentAcquireOneWinner(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	const contenders, rounds = 8, 15
	var last uint64
	for round := range rounds {
		var (
			mu      sync.Mutex
			winners []held
			wg      sync.WaitGroup
			start   = make(chan struct{})
		)
		for i := range contenders {
			owner := fmt.Sprintf("o%d", i)
			if round%2 == 1 {
				owner = "same" // one owner's concurrent attempts are contenders too
			}
			wg.Go(func() {
				<-start
				h := held{key: "hot", owner: owner, attempt: newAttempt()}
				var err error
				h.Grant, err = b.Acquire(ctx, backend.AcquireRequest{Key: h.key, Owner: h.owner, Attempt: h.attempt, TTL: live})
				if err != nil {
					t.Errorf("round %d: %v", round, err)
					return
				}
				if h.Acquired {
					mu.Lock()
					winners = append(winners, h)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners", round, len(winners))
		}
		if winners[0].Token <= last {
			t.Fatalf("round %d: token %d after %d", round, winners[0].Token, last)
		}
		last = winners[0].Token
		if err := b.Release(ctx, winners[0].releaseReq()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSweepDeletesExpiredRows(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 100))
	var last held
	for _, k := range []string{"s1", "s2", "s3"} {
		last = mustAcquire(t, b, k, "a", 20*time.Millisecond)
	}
	waitPast(t, e.admin, last.ExpiresAt)
	mustAcquire(t, b, "live", "a", live) // sweeps first
	if n := e.rows(t); n != 1 {
		t.Fatalf("%d rows after the sweep, want only the live one", n)
	}
}

func TestRenewBatch(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	ctx := ctxT(t)
	g1 := mustAcquire(t, b, "k1", "a", live)
	g2 := mustAcquire(t, b, "k2", "a", live)
	short := mustAcquire(t, b, "k3", "a", 20*time.Millisecond)
	waitPast(t, e.admin, short.ExpiresAt)
	other := g2.renewReq(live)
	other.Attempt = newAttempt()
	reqs := []backend.RenewRequest{
		g1.renewReq(2 * live),
		{Key: "k2", Owner: "b", Attempt: g2.attempt, Token: g2.Token, TTL: live}, // foreign owner
		short.renewReq(live), // expired
		g2.renewReq(3 * live),
		{Key: "k\x00", Owner: "a", Attempt: g1.attempt, Token: 1, TTL: time.Minute}, // invalid
		g1.renewReq(2 * live), // repeated
		{Key: "k1", Owner: "a", Attempt: g1.attempt, Token: 1 << 63, TTL: live},           // beyond bigint
		{Key: "none", Owner: "a", Attempt: g1.attempt, Token: g1.Token, TTL: time.Minute}, // never held
		other, // same owner and token, another attempt
	}
	before := serverNow(t, e)
	res, err := b.RenewBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	after := serverNow(t, e)
	if len(res) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(res), len(reqs))
	}
	for _, i := range []int{0, 3, 5} {
		if res[i].Err != nil || !res[i].Grant.Acquired || res[i].Grant.Token != reqs[i].Token {
			t.Errorf("result %d = %+v, want renewed", i, res[i])
			continue
		}
		grantedBetween(t, fmt.Sprintf("result %d", i), res[i].Grant.ExpiresAt, reqs[i].TTL, before, after)
	}
	for _, i := range []int{1, 2, 6, 7, 8} {
		if !errors.Is(res[i].Err, backend.ErrNotHeld) {
			t.Errorf("result %d = %+v, want ErrNotHeld", i, res[i])
		}
	}
	if !errors.Is(res[4].Err, backend.ErrInvalidRequest) {
		t.Errorf("result 4 = %+v, want ErrInvalidRequest", res[4])
	}
	// The renewals are real: b is refused k1 and k2 until the new expiries.
	for i, k := range []string{"k1", "k2"} {
		busy := acquireAs(t, b, k, "b", newAttempt(), time.Second)
		if busy.Acquired || !busy.HolderExpiresAt.Equal(res[3*i].Grant.ExpiresAt) {
			t.Errorf("Acquire(%s) by b = %+v, want refused until %v", k, busy.Grant, res[3*i].Grant.ExpiresAt)
		}
	}
	if res, err := b.RenewBatch(ctx, nil); err != nil || len(res) != 0 {
		t.Errorf("empty batch = %v, %v", res, err)
	}
}
