package backendtest

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

// backendCases check the Backend contract itself, without a Manager.
func (s *suite) backendCases() []testCase {
	return []testCase{
		{"AcquireFree", s.bAcquireFree},
		{"BusyIsNotAnError", s.bBusy},
		{"ReacquireByOwnerIsIdempotent", s.bReacquire},
		{"RenewKeepsTokenAndExtends", s.bRenew},
		{"RenewByStrangerOrStaleToken", s.bRenewStale},
		{"ReleaseOnlyByOwnerAndToken", s.bReleaseFiltered},
		{"ReleaseTokenZeroReleasesOwnersHolding", s.bReleaseTokenZero},
		{"ExpiryFreesKeyAndTokensIncrease", s.bExpiry},
		{"TokensIncreaseAcrossReleaseAndTakeover", s.bTokens},
		{"InvalidRequestsTouchNothing", s.bInvalid},
		{"KeysRoundTripAndNeverCollide", s.bKeys},
		{"Metadata", s.bMetadata},
		{"ConcurrentAcquireHasOneWinner", s.bConcurrent},
		{"ReleaseNotifications", s.bWatch},
	}
}

func acquire(t *testing.T, b backend.Backend, key, owner string, ttl time.Duration) backend.Grant {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, owner, err)
	}
	return g
}

func mustGrant(t *testing.T, b backend.Backend, key, owner string, ttl time.Duration) backend.Grant {
	t.Helper()
	g := acquire(t, b, key, owner, ttl)
	if !g.Acquired || g.Token == 0 {
		t.Fatalf("Acquire(%q, %q) = %+v, want a grant with a token", key, owner, g)
	}
	return g
}

// nearNow reports whether ts is within tolerance of now+d: backend clocks are
// not ours, but on a test machine they are close.
func nearNow(ts time.Time, d time.Duration) bool {
	diff := time.Until(ts) - d
	return diff > -5*time.Second && diff < 5*time.Second
}

func (s *suite) bAcquireFree(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g := mustGrant(t, b, k, "o1", time.Minute)
	if !nearNow(g.ExpiresAt, time.Minute) {
		t.Errorf("ExpiresAt %v is not about a minute from now", g.ExpiresAt)
	}
}

func (s *suite) bBusy(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g1 := mustGrant(t, b, k, "o1", time.Minute)
	g := acquire(t, b, k, "o2", time.Minute)
	if g.Acquired {
		t.Fatalf("second owner got %+v while o1 holds", g)
	}
	if g.Holder != "o1" || !nearNow(g.HolderExpiresAt, time.Minute) {
		t.Errorf("busy grant = %+v, want holder o1 expiring with it (%v)", g, g1.ExpiresAt)
	}
}

func (s *suite) bReacquire(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g1 := mustGrant(t, b, k, "o1", time.Minute)
	g2 := mustGrant(t, b, k, "o1", 2*time.Minute)
	if g2.Token != g1.Token {
		t.Errorf("re-acquire by the same owner changed the token: %d → %d", g1.Token, g2.Token)
	}
	if !g2.ExpiresAt.After(g1.ExpiresAt) {
		t.Errorf("re-acquire did not refresh the expiry: %v → %v", g1.ExpiresAt, g2.ExpiresAt)
	}
}

func (s *suite) bRenew(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g1 := mustGrant(t, b, k, "o1", time.Minute)
	g2, err := b.Renew(ctxT(t), backend.RenewRequest{Key: k, Owner: "o1", Token: g1.Token, TTL: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if g2.Token != g1.Token || !g2.ExpiresAt.After(g1.ExpiresAt) || !nearNow(g2.ExpiresAt, 2*time.Minute) {
		t.Errorf("renew = %+v after %+v: want same token, later expiry", g2, g1)
	}
}

func (s *suite) bRenewStale(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	g := mustGrant(t, b, k, "o1", time.Minute)
	for _, r := range []backend.RenewRequest{
		{Key: k, Owner: "o2", Token: g.Token, TTL: time.Minute},
		{Key: k, Owner: "o1", Token: g.Token + 1, TTL: time.Minute},
		{Key: k + "other", Owner: "o1", Token: g.Token, TTL: time.Minute},
	} {
		if _, err := b.Renew(ctx, r); !errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("Renew(%+v) = %v, want ErrNotHeld", r, err)
		}
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: k, Owner: "o1", Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: k, Owner: "o1", Token: g.Token, TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew after Release = %v, want ErrNotHeld", err)
	}
}

func (s *suite) bReleaseFiltered(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	g := mustGrant(t, b, k, "o1", time.Minute)
	for _, r := range []backend.ReleaseRequest{
		{Key: k, Owner: "o2", Token: g.Token},
		{Key: k, Owner: "o2", Token: 0},
		{Key: k, Owner: "o1", Token: g.Token + 1},
	} {
		if err := b.Release(ctx, r); err != nil {
			t.Errorf("Release(%+v) = %v, want nil", r, err)
		}
	}
	if acquire(t, b, k, "o2", time.Minute).Acquired {
		t.Fatal("a stranger's release freed the key")
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: k, Owner: "o1", Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: k, Owner: "o1", Token: g.Token}); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	mustGrant(t, b, k, "o2", time.Minute)
}

func (s *suite) bReleaseTokenZero(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	mustGrant(t, b, k, "o1", time.Minute)
	if err := b.Release(ctxT(t), backend.ReleaseRequest{Key: k, Owner: "o1"}); err != nil {
		t.Fatal(err)
	}
	mustGrant(t, b, k, "o2", time.Minute)
}

func (s *suite) bExpiry(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g1 := mustGrant(t, b, k, "o1", 50*time.Millisecond)
	var g2 backend.Grant
	eventually(t, "the expired key to be granted to another owner", func() bool {
		g2 = acquire(t, b, k, "o2", time.Minute)
		return g2.Acquired
	})
	if g2.Token <= g1.Token {
		t.Errorf("takeover after expiry: token %d, want > %d", g2.Token, g1.Token)
	}
	if _, err := b.Renew(ctxT(t), backend.RenewRequest{Key: k, Owner: "o1", Token: g1.Token, TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("the expired owner's Renew = %v, want ErrNotHeld", err)
	}
	// Same owner after its own expiry: a new holding, a new token.
	k2 := k + "self"
	h1 := mustGrant(t, b, k2, "o1", 50*time.Millisecond)
	time.Sleep(150 * time.Millisecond) // let the store's clock pass the TTL
	h2 := mustGrant(t, b, k2, "o1", time.Minute)
	if h2.Token <= h1.Token {
		t.Errorf("re-acquire after own expiry: token %d, want > %d", h2.Token, h1.Token)
	}
}

func (s *suite) bTokens(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	var last uint64
	for i := range 6 {
		owner := fmt.Sprintf("o%d", i%2)
		g := mustGrant(t, b, k, owner, time.Minute)
		if g.Token <= last {
			t.Fatalf("grant %d: token %d, want > %d", i, g.Token, last)
		}
		last = g.Token
		if err := b.Release(ctx, backend.ReleaseRequest{Key: k, Owner: owner, Token: g.Token}); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *suite) bInvalid(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	bad := []backend.AcquireRequest{
		{Key: "", Owner: "o", TTL: time.Minute},
		{Key: "  ", Owner: "o", TTL: time.Minute},
		{Key: k + "\x00", Owner: "o", TTL: time.Minute},
		{Key: k + "\xff", Owner: "o", TTL: time.Minute},
		{Key: k + strings.Repeat("x", backend.MaxKeyRunes), Owner: "o", TTL: time.Minute},
		{Key: k, Owner: "", TTL: time.Minute},
		{Key: k, Owner: "o", TTL: 0},
		{Key: k, Owner: "o", TTL: backend.MaxTTL + 1},
		{Key: k, Owner: "o", TTL: time.Minute, Metadata: strings.Repeat("m", backend.MaxMetadataBytes+1)},
	}
	for _, r := range bad {
		if g, err := b.Acquire(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Acquire(%.80q…) = %+v, %v; want ErrInvalidRequest", fmt.Sprint(r), g, err)
		}
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: k, Owner: "o", Token: 0, TTL: time.Minute}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Renew with token 0 = %v, want ErrInvalidRequest", err)
	}
	mustGrant(t, b, k, "o2", time.Minute) // nothing above took the key
}

// bKeys: any text key round-trips and distinct keys never share a lease.
func (s *suite) bKeys(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	suffixes := []string{
		"plain", "with space", "new\nline", "tab\t", "{brace}", "}{", "glob*?[a-z]", "Foo", "foo",
		"x'; DROP TABLE lease.leases; --", `"quoted"`, "back\\slash", "ünïcødé", "🔒emoji", "%_like",
		"colon:colon", "", " ",
	}
	long := k + strings.Repeat("界", backend.MaxKeyRunes-len([]rune(k)))
	keys := []string{long}
	for _, sfx := range suffixes {
		keys = append(keys, k+sfx)
	}
	grants := map[string]backend.Grant{}
	for _, key := range keys {
		grants[key] = mustGrant(t, b, key, "o1", time.Minute)
	}
	for _, key := range keys {
		g := acquire(t, b, key, "o2", time.Minute)
		if g.Acquired || g.Holder != "o1" {
			t.Errorf("key %q: o2 got %+v, want busy by o1", key, g)
		}
		r, err := b.Renew(ctx, backend.RenewRequest{Key: key, Owner: "o1", Token: grants[key].Token, TTL: time.Minute})
		if err != nil || r.Token != grants[key].Token {
			t.Errorf("key %q: renew = %+v, %v", key, r, err)
		}
	}
	// Releasing one key frees exactly that key.
	victim := k + "Foo"
	if err := b.Release(ctx, backend.ReleaseRequest{Key: victim, Owner: "o1", Token: grants[victim].Token}); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		g := acquire(t, b, key, "o2", time.Minute)
		if g.Acquired != (key == victim) {
			t.Errorf("after releasing %q, o2 acquiring %q got Acquired=%v", victim, key, g.Acquired)
		}
	}
}

func (s *suite) bMetadata(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	md := strings.Repeat("é", backend.MaxMetadataBytes/2) // exactly the limit, multi-byte
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: k, Owner: "o1", TTL: time.Minute, Metadata: md})
	if err != nil || !g.Acquired {
		t.Fatalf("metadata at the limit: %+v, %v", g, err)
	}
}

func (s *suite) bConcurrent(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	const n = 16
	var wg sync.WaitGroup
	wins := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			owner := fmt.Sprintf("o%d", i)
			g, err := b.Acquire(context.Background(), backend.AcquireRequest{Key: k, Owner: owner, TTL: time.Minute})
			if err != nil {
				t.Errorf("%s: %v", owner, err)
			}
			if g.Acquired {
				wins <- owner
			}
		})
	}
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("winners = %v, want exactly one", winners)
	}
}

func (s *suite) bWatch(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	w, ok := b.(backend.ReleaseWatcher)
	if !ok {
		t.Skipf("%s has no release notifications (waiters poll)", b.Info().Name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() { done <- w.WatchReleases(ctx, func(key string) { got <- key }) }()
	defer func() {
		cancel()
		<-done
	}()
	// Subscriptions are asynchronous: release until a notice arrives.
	deadline := time.After(patience)
	for {
		g := mustGrant(t, b, k, "o1", time.Minute)
		if err := b.Release(ctxT(t), backend.ReleaseRequest{Key: k, Owner: "o1", Token: g.Token}); err != nil {
			t.Fatal(err)
		}
		select {
		case key := <-got:
			if key != k {
				t.Fatalf("notice for %q, want %q", key, k)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no release notification")
		}
	}
}
