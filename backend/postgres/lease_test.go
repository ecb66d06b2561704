package postgres

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

func mustAcquire(t *testing.T, b *Backend, key, owner string, ttl time.Duration) backend.Grant {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, owner, err)
	}
	if !g.Acquired {
		t.Fatalf("Acquire(%q, %q): not acquired, held by %q until %v", key, owner, g.Holder, g.HolderExpiresAt)
	}
	return g
}

func TestAcquireFreeThenBusy(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)

	g := mustAcquire(t, b, "job", "a", time.Minute)
	if g.Token == 0 {
		t.Fatal("token 0 granted")
	}
	if d := time.Until(g.ExpiresAt); d < 50*time.Second || d > 70*time.Second {
		t.Fatalf("ExpiresAt %v is not about a minute from now", g.ExpiresAt)
	}
	busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: "job", Owner: "b", TTL: time.Minute})
	if err != nil {
		t.Fatalf("Acquire by b: %v", err)
	}
	if busy.Acquired || busy.Holder != "a" || !busy.HolderExpiresAt.Equal(g.ExpiresAt) || busy.Token != 0 {
		t.Fatalf("Acquire by b = %+v, want not acquired, holder a until %v", busy, g.ExpiresAt)
	}
}

func TestReacquireBySameOwnerKeepsToken(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	g1 := mustAcquire(t, b, "job", "a", time.Second)
	g2 := mustAcquire(t, b, "job", "a", time.Minute)
	if g2.Token != g1.Token {
		t.Fatalf("re-acquire changed the token: %d then %d", g1.Token, g2.Token)
	}
	if !g2.ExpiresAt.After(g1.ExpiresAt) {
		t.Fatalf("re-acquire did not extend the expiry: %v then %v", g1.ExpiresAt, g2.ExpiresAt)
	}
}

func TestTokensIncreaseAcrossReleaseExpiryAndTakeover(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(-1, 0)) // keep expired rows: exercise the takeover branch
	ctx := ctxT(t)

	g1 := mustAcquire(t, b, "k", "a", time.Minute)
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a", Token: g1.Token}); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "a", 20*time.Millisecond) // after release, same owner
	waitPast(g2.ExpiresAt)
	g3 := mustAcquire(t, b, "k", "a", 20*time.Millisecond) // own expired row: a new grant
	waitPast(g3.ExpiresAt)
	g4 := mustAcquire(t, b, "k", "b", time.Minute) // takeover of an expired row
	if !(g1.Token < g2.Token && g2.Token < g3.Token && g3.Token < g4.Token) {
		t.Fatalf("tokens not strictly increasing: %d %d %d %d", g1.Token, g2.Token, g3.Token, g4.Token)
	}
	if e.rows(t) != 1 {
		t.Fatalf("want one row for one name, have %d", e.rows(t))
	}
}

// waitPast waits until the server's expiry t has surely passed on the local
// clock too (the server runs on this machine; 50ms covers any skew).
func waitPast(t time.Time) { time.Sleep(time.Until(t) + 50*time.Millisecond) }

func TestRenewExtendsAndKeepsToken(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "a", time.Second)
	r, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "a", Token: g.Token, TTL: time.Hour})
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if !r.Acquired || r.Token != g.Token || time.Until(r.ExpiresAt) < 59*time.Minute {
		t.Fatalf("Renew = %+v, want token %d and an hour", r, g.Token)
	}
	busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "b", TTL: time.Second})
	if err != nil || busy.Acquired || !busy.HolderExpiresAt.Equal(r.ExpiresAt) {
		t.Fatalf("Acquire by b after renew = %+v, %v", busy, err)
	}
}

func TestRenewNotHeld(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(-1, 0))
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "a", time.Minute)

	for _, r := range []backend.RenewRequest{
		{Key: "k", Owner: "b", Token: g.Token, TTL: time.Minute},     // foreign owner
		{Key: "k", Owner: "a", Token: g.Token + 1, TTL: time.Minute}, // stale or forged token
		{Key: "k", Owner: "a", Token: 1 << 63, TTL: time.Minute},     // beyond bigint
		{Key: "other", Owner: "a", Token: g.Token, TTL: time.Minute}, // never held
	} {
		if _, err := b.Renew(ctx, r); !errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("Renew(%+v) = %v, want ErrNotHeld", r, err)
		}
	}

	short := mustAcquire(t, b, "short", "a", 20*time.Millisecond)
	waitPast(short.ExpiresAt)
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "short", Owner: "a", Token: short.Token, TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew after expiry = %v, want ErrNotHeld", err)
	}

	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a", Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "a", Token: g.Token, TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew after release = %v, want ErrNotHeld", err)
	}
}

func TestReleaseIsFilteredAndIdempotent(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "a", time.Minute)

	// A foreign owner or a stale token releases nothing.
	for _, r := range []backend.ReleaseRequest{
		{Key: "k", Owner: "b", Token: g.Token},
		{Key: "k", Owner: "b", Token: 0},
		{Key: "k", Owner: "a", Token: g.Token + 1},
	} {
		if err := b.Release(ctx, r); err != nil {
			t.Fatalf("Release(%+v): %v", r, err)
		}
		if busy, _ := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "b", TTL: time.Minute}); busy.Acquired {
			t.Fatalf("Release(%+v) freed a's lease", r)
		}
	}
	for range 2 {
		if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a", Token: g.Token}); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	mustAcquire(t, b, "k", "b", time.Minute)
}

func TestReleaseTokenZeroReleasesOwnersHolding(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	mustAcquire(t, b, "k", "a", time.Minute)
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, "k", "b", time.Minute)
}

func TestInvalidRequestsTouchNothing(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	long := strings.Repeat("é", backend.MaxKeyRunes+1)
	acquires := []backend.AcquireRequest{
		{Key: "", Owner: "a", TTL: time.Second},
		{Key: "  \n", Owner: "a", TTL: time.Second},
		{Key: "k\x00", Owner: "a", TTL: time.Second},
		{Key: "\xff", Owner: "a", TTL: time.Second},
		{Key: long, Owner: "a", TTL: time.Second},
		{Key: "k", Owner: "", TTL: time.Second},
		{Key: "k", Owner: "a", TTL: 0},
		{Key: "k", Owner: "a", TTL: backend.MaxTTL + 1},
		{Key: "k", Owner: "a", TTL: time.Second, Metadata: strings.Repeat("x", backend.MaxMetadataBytes+1)},
		{Key: "k", Owner: "a", TTL: time.Second, Metadata: "a\x00b"},
	}
	for _, r := range acquires {
		if _, err := b.Acquire(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Acquire(key %q, owner %q, ttl %v, %d bytes of metadata) = %v, want ErrInvalidRequest", r.Key, r.Owner, r.TTL, len(r.Metadata), err)
		}
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "a", Token: 0, TTL: time.Second}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Renew token 0 = %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k\x00", Owner: "a"}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Release bad key = %v", err)
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
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: owner, TTL: backend.MaxTTL, Metadata: meta})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire at the limits = %+v, %v", g, err)
	}
	if d := time.Until(g.ExpiresAt); d < backend.MaxTTL-time.Minute {
		t.Fatalf("MaxTTL expiry only %v away", d)
	}
	var stored string
	if err := e.admin.QueryRow(ctx, "SELECT metadata FROM "+b.names.table+" WHERE lease_name = $1", key).Scan(&stored); err != nil || stored != meta {
		t.Fatalf("metadata not stored intact: %v", err)
	}
	g, err = b.Acquire(ctx, backend.AcquireRequest{Key: "tiny", Owner: owner, TTL: backend.MinTTL})
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
	for _, k := range keys {
		g := mustAcquire(t, b, k, "a", time.Minute)
		if prev, dup := tokens[g.Token]; dup {
			t.Fatalf("keys %q and %q share token %d", prev, k, g.Token)
		}
		tokens[g.Token] = k
	}
	if n := e.rows(t); n != len(keys) {
		t.Fatalf("%d keys made %d rows", len(keys), n)
	}
	for _, k := range keys {
		busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: "b", TTL: time.Minute})
		if err != nil || busy.Acquired || busy.Holder != "a" {
			t.Fatalf("Acquire(%q) by b = %+v, %v", k, busy, err)
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
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	for _, s := range stored {
		if !want[s] {
			t.Fatalf("stored name %q is not one of the keys", s)
		}
	}
	for _, k := range keys {
		if err := b.Release(ctx, backend.ReleaseRequest{Key: k, Owner: "a"}); err != nil {
			t.Fatalf("Release(%q): %v", k, err)
		}
	}
	if n := e.rows(t); n != 0 {
		t.Fatalf("%d rows left after releasing every key", n)
	}
}

// Many owners race for one name, round after round: exactly one wins each
// round and the winners' tokens increase.
func TestConcurrentAcquireOneWinner(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	const owners, rounds = 8, 15
	var last uint64
	for round := range rounds {
		var (
			mu      sync.Mutex
			winners []backend.Grant
			wg      sync.WaitGroup
			start   = make(chan struct{})
		)
		for i := range owners {
			wg.Go(func() {
				<-start
				g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "hot", Owner: string(rune('a' + i)), TTL: time.Minute})
				if err != nil {
					t.Errorf("round %d: %v", round, err)
					return
				}
				if g.Acquired {
					mu.Lock()
					winners = append(winners, g)
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
		if err := b.Release(ctx, backend.ReleaseRequest{Key: "hot", Owner: "x"}); err != nil {
			t.Fatal(err)
		}
		for i := range owners {
			if err := b.Release(ctx, backend.ReleaseRequest{Key: "hot", Owner: string(rune('a' + i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestSweepDeletesExpiredRows(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 100))
	var last backend.Grant
	for _, k := range []string{"s1", "s2", "s3"} {
		last = mustAcquire(t, b, k, "a", 20*time.Millisecond)
	}
	waitPast(last.ExpiresAt)
	mustAcquire(t, b, "live", "a", time.Minute) // sweeps first
	if n := e.rows(t); n != 1 {
		t.Fatalf("%d rows after the sweep, want only the live one", n)
	}
}

func TestRenewBatch(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(-1, 0))
	ctx := ctxT(t)
	g1 := mustAcquire(t, b, "k1", "a", time.Second)
	g2 := mustAcquire(t, b, "k2", "a", time.Second)
	short := mustAcquire(t, b, "k3", "a", 20*time.Millisecond)
	waitPast(short.ExpiresAt)
	reqs := []backend.RenewRequest{
		{Key: "k1", Owner: "a", Token: g1.Token, TTL: time.Hour},
		{Key: "k2", Owner: "b", Token: g2.Token, TTL: time.Hour},     // foreign owner
		{Key: "k3", Owner: "a", Token: short.Token, TTL: time.Hour},  // expired
		{Key: "k2", Owner: "a", Token: g2.Token, TTL: time.Minute},   // fine
		{Key: "k\x00", Owner: "a", Token: 1, TTL: time.Minute},       // invalid
		{Key: "k1", Owner: "a", Token: g1.Token, TTL: time.Hour},     // repeated
		{Key: "k1", Owner: "a", Token: 1 << 63, TTL: time.Hour},      // beyond bigint
		{Key: "none", Owner: "a", Token: g1.Token, TTL: time.Minute}, // never held
	}
	res, err := b.RenewBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(res), len(reqs))
	}
	for _, i := range []int{0, 3, 5} {
		if res[i].Err != nil || !res[i].Grant.Acquired || res[i].Grant.Token != reqs[i].Token ||
			time.Until(res[i].Grant.ExpiresAt) < reqs[i].TTL-time.Minute/2 {
			t.Errorf("result %d = %+v, want renewed for %v", i, res[i], reqs[i].TTL)
		}
	}
	for _, i := range []int{1, 2, 6, 7} {
		if !errors.Is(res[i].Err, backend.ErrNotHeld) {
			t.Errorf("result %d = %+v, want ErrNotHeld", i, res[i])
		}
	}
	if !errors.Is(res[4].Err, backend.ErrInvalidRequest) {
		t.Errorf("result 4 = %+v, want ErrInvalidRequest", res[4])
	}
	// The renewals are real: b cannot take k1 or k2.
	for _, k := range []string{"k1", "k2"} {
		if busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: "b", TTL: time.Second}); err != nil || busy.Acquired {
			t.Errorf("Acquire(%s) by b = %+v, %v", k, busy, err)
		}
	}
	if res, err := b.RenewBatch(ctx, nil); err != nil || len(res) != 0 {
		t.Errorf("empty batch = %v, %v", res, err)
	}
}
