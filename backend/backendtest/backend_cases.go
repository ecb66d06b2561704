package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
		{"RetryOfTheSameAttemptIsIdempotent", s.bRetrySameAttempt},
		{"SameOwnerNewAttemptIsAnotherContender", s.bSameOwnerNewAttempt},
		{"RenewKeepsTokenAndExtends", s.bRenew},
		{"RenewNamesTheHolding", s.bRenewStale},
		{"ReleaseNamesTheHolding", s.bReleaseFiltered},
		{"ReleaseTokenZeroMatchesOnlyItsAttempt", s.bReleaseTokenZero},
		{"LateReleaseNeverTouchesANewerHolding", s.bLateRelease},
		{"ExpiryFreesKeyAndTokensIncrease", s.bExpiry},
		{"TokensIncreaseAcrossReleaseAndTakeover", s.bTokens},
		{"InvalidRequestsTouchNothing", s.bInvalid},
		{"KeysRoundTripAndNeverCollide", s.bKeys},
		{"Metadata", s.bMetadata},
		{"ConcurrentAcquireHasOneWinner", s.bConcurrent},
		{"ConcurrentAttemptsOfOneOwnerHaveOneWinner", s.bConcurrentSameOwner},
		{"ReleaseNotifications", s.bWatch},
		{"EveryCallEndsWithItsContext", s.bBlackholed},
		{"InfoDeclaresWhatTheMethodsDo", s.bInfo},
		{"RenewOfAnExpiredHoldingIsNotHeld", s.bExpiredNotRevived},
		{"NamesDifferingByTrailingSpacesOrCaseAreSeparate", s.bExactNames},
	}
}

// bInfo: what Info declares is what the optional methods do, since the
// engine goes by Info alone. A declared Batch, WatchReleases or WatchHandOffs
// never answers errors.ErrUnsupported, an undeclared one always does (the
// watches are asked with an ended context, so a real one returns at once);
// Shard answers "" unless Sharded.
func (s *suite) bInfo(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	info := b.Info()
	check := func(method string, declared bool, err error) {
		t.Helper()
		if unsupported := errors.Is(err, errors.ErrUnsupported); unsupported == declared {
			t.Errorf("%s = %v, but Info declares it %v", method, err, declared)
		}
	}
	calls := []backend.Call{{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: k, Owner: "o1", Attempt: newAttempt(), TTL: time.Minute}}}
	b.Batch(ctxT(t), calls)
	check("Batch", info.Batches, calls[0].Err)
	if info.Batches && (calls[0].Err != nil || !calls[0].Grant.Acquired) {
		t.Errorf("Batch of an acquire of a free key = %+v, %v", calls[0].Grant, calls[0].Err)
	}
	if calls[0].Grant.Acquired {
		a := calls[0].Acquire
		if err := b.Release(ctxT(t), backend.ReleaseRequest{Key: k, Owner: a.Owner, Attempt: a.Attempt, Token: calls[0].Grant.Token}); err != nil {
			t.Error(err)
		}
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	check("WatchReleases", info.AnnouncesReleases, within(t, s.patience, func() error {
		return b.WatchReleases(ended, func(string) {})
	}))
	check("WatchHandOffs", info.HandOffNotices, within(t, s.patience, func() error {
		return b.WatchHandOffs(ended, newAttempt(), func(backend.HandOff) {}, nil)
	}))
	if sh := b.Shard(k); !info.Sharded && sh != "" {
		t.Errorf("Shard = %q, but Info declares no shards", sh)
	}
}

// within runs fn and returns its error, failing the test when fn has not
// returned after d (fn then runs on).
func within(t *testing.T, d time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still running after %v with its context ended", d)
		return nil
	}
}

// held is the outcome of one acquire attempt: the grant (or refusal) and the
// identity that names the holding in later requests.
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
func newAttempt() string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return "t" + hex.EncodeToString(r[:])
}

// acquire makes one new acquire attempt.
func acquire(t *testing.T, b backend.Backend, key, owner string, ttl time.Duration) held {
	t.Helper()
	return acquireAs(t, b, key, owner, newAttempt(), ttl)
}

// acquireAs makes an acquire as the given attempt (a retry when it is not new).
func acquireAs(t *testing.T, b backend.Backend, key, owner, attempt string, ttl time.Duration) held {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%q, %q, %q): %v", key, owner, attempt, err)
	}
	return held{Grant: g, key: key, owner: owner, attempt: attempt}
}

func mustGrant(t *testing.T, b backend.Backend, key, owner string, ttl time.Duration) held {
	t.Helper()
	h := acquire(t, b, key, owner, ttl)
	mustBeGranted(t, h)
	return h
}

func mustBeGranted(t *testing.T, h held) {
	t.Helper()
	if !h.Acquired || h.Token == 0 {
		t.Fatalf("Acquire(%q, %q) = %+v, want a grant with a token", h.key, h.owner, h.Grant)
	}
}

// mustBeBusyBy checks a refusal names the holding in the way.
func mustBeBusyBy(t *testing.T, h held, by held, ttl time.Duration) {
	t.Helper()
	if h.Acquired {
		t.Fatalf("%s (attempt %s) got %+v while %s (attempt %s) holds", h.owner, h.attempt, h.Grant, by.owner, by.attempt)
	}
	if h.Holder != by.owner || h.HolderToken != by.Token {
		t.Errorf("refusal = %+v, want holder %q with token %d", h.Grant, by.owner, by.Token)
	}
	if !nearNow(h.HolderExpiresAt, ttl) {
		t.Errorf("refusal: HolderExpiresAt %v is not about %v from now", h.HolderExpiresAt, ttl)
	}
	if h.HolderExpiresIn <= 0 || h.HolderExpiresIn > ttl+time.Second || h.HolderExpiresIn < ttl-10*time.Second {
		t.Errorf("refusal: HolderExpiresIn %v, want about %v", h.HolderExpiresIn, ttl)
	}
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
	mustBeBusyBy(t, acquire(t, b, k, "o2", time.Minute), g1, time.Minute)
}

// A retry of the same attempt (its first answer was lost) gets the same
// holding back, refreshed.
func (s *suite) bRetrySameAttempt(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g1 := mustGrant(t, b, k, "o1", time.Minute)
	g2 := acquireAs(t, b, k, "o1", g1.attempt, 2*time.Minute)
	mustBeGranted(t, g2)
	if g2.Token != g1.Token {
		t.Errorf("retry of the same attempt changed the token: %d → %d", g1.Token, g2.Token)
	}
	if !g2.ExpiresAt.After(g1.ExpiresAt) {
		t.Errorf("retry did not refresh the expiry: %v → %v", g1.ExpiresAt, g2.ExpiresAt)
	}
	// The attempt identity is the holding's, not the owner's: another owner
	// naming the same attempt is refused.
	mustBeBusyBy(t, acquireAs(t, b, k, "o2", g1.attempt, time.Minute), g2, 2*time.Minute)
}

// Two acquires by one owner are two contenders (two Managers configured with
// the same owner, or a new Acquire after a release whose answer was lost):
// the second never shares or refreshes the first's holding.
func (s *suite) bSameOwnerNewAttempt(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g1 := mustGrant(t, b, k, "o1", time.Minute)
	mustBeBusyBy(t, acquire(t, b, k, "o1", time.Minute), g1, time.Minute)
	if err := b.Release(ctxT(t), g1.releaseReq()); err != nil {
		t.Fatal(err)
	}
	g3 := mustGrant(t, b, k, "o1", time.Minute)
	if g3.Token <= g1.Token {
		t.Errorf("the same owner's next holding: token %d, want > %d", g3.Token, g1.Token)
	}
}

func (s *suite) bRenew(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g1 := mustGrant(t, b, k, "o1", time.Minute)
	g2, err := b.Renew(ctxT(t), g1.renewReq(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if g2.Token != g1.Token || !g2.ExpiresAt.After(g1.ExpiresAt) || !nearNow(g2.ExpiresAt, 2*time.Minute) {
		t.Errorf("renew = %+v after %+v: want same token, later expiry", g2, g1.Grant)
	}
}

func (s *suite) bRenewStale(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	g := mustGrant(t, b, k, "o1", time.Minute)
	stranger, otherAttempt, otherToken, otherKey := g, g, g, g
	stranger.owner = "o2"
	otherAttempt.attempt = newAttempt()
	otherToken.Token++
	otherKey.key += "other"
	for _, h := range []held{stranger, otherAttempt, otherToken, otherKey} {
		r := h.renewReq(time.Minute)
		if _, err := b.Renew(ctx, r); !errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("Renew(%+v) = %v, want ErrNotHeld", r, err)
		}
	}
	if err := b.Release(ctx, g.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Renew(ctx, g.renewReq(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Renew after Release = %v, want ErrNotHeld", err)
	}
}

func (s *suite) bReleaseFiltered(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	g := mustGrant(t, b, k, "o1", time.Minute)
	stranger, strangerAny, otherAttempt, otherAttemptAny, otherToken := g, g, g, g, g
	stranger.owner = "o2"
	strangerAny.owner, strangerAny.Token = "o2", 0
	otherAttempt.attempt = newAttempt()
	otherAttemptAny.attempt, otherAttemptAny.Token = newAttempt(), 0
	otherToken.Token++
	for _, h := range []held{stranger, strangerAny, otherAttempt, otherAttemptAny, otherToken} {
		if err := b.Release(ctx, h.releaseReq()); err != nil {
			t.Errorf("Release(%+v) = %v, want nil", h.releaseReq(), err)
		}
	}
	mustBeBusyBy(t, acquire(t, b, k, "o2", time.Minute), g, time.Minute)
	if err := b.Release(ctx, g.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, g.releaseReq()); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	mustGrant(t, b, k, "o2", time.Minute)
}

// Token 0 releases the holding its attempt made, whatever its token (the
// engine's cleanup after an acquire whose answer was lost), and nothing else.
func (s *suite) bReleaseTokenZero(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g := mustGrant(t, b, k, "o1", time.Minute)
	cleanup := g
	cleanup.Token = 0
	if err := b.Release(ctxT(t), cleanup.releaseReq()); err != nil {
		t.Fatal(err)
	}
	mustGrant(t, b, k, "o2", time.Minute)
}

// A release of an old holding that reaches the store after the same owner's
// next grant (a cleanup delayed in the network) must leave the new holding
// alone: otherwise another owner is let in while the new holder still holds.
func (s *suite) bLateRelease(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	old := mustGrant(t, b, k, "o1", s.tiny)
	var cur held
	s.eventually(t, "the expired key to be granted again to o1", func() bool {
		cur = acquire(t, b, k, "o1", time.Minute)
		return cur.Acquired
	})
	if cur.Token <= old.Token {
		t.Errorf("new holding: token %d, want > %d", cur.Token, old.Token)
	}
	oldAny := old
	oldAny.Token = 0
	for _, r := range []backend.ReleaseRequest{old.releaseReq(), oldAny.releaseReq()} {
		if err := b.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	mustBeBusyBy(t, acquire(t, b, k, "o2", time.Minute), cur, time.Minute)
	if _, err := b.Renew(ctx, cur.renewReq(time.Minute)); err != nil {
		t.Errorf("the new holding's renewal after the late release: %v", err)
	}
}

func (s *suite) bExpiry(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	g1 := mustGrant(t, b, k, "o1", s.tiny)
	var g2 held
	s.eventually(t, "the expired key to be granted to another owner", func() bool {
		g2 = acquire(t, b, k, "o2", time.Minute)
		return g2.Acquired
	})
	if g2.Token <= g1.Token {
		t.Errorf("takeover after expiry: token %d, want > %d", g2.Token, g1.Token)
	}
	if _, err := b.Renew(ctxT(t), g1.renewReq(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("the expired owner's Renew = %v, want ErrNotHeld", err)
	}
	// The same attempt after its own expiry: a new holding, a new token (the
	// retry of an attempt whose holding is gone is not a refresh).
	k2 := k + "self"
	h1 := mustGrant(t, b, k2, "o1", s.tiny)
	// Expiry has no signal to wait for: let the store's clock (this host's)
	// pass the TTL. A retry before that would refresh h1 instead.
	time.Sleep(3 * s.tiny)
	h2 := acquireAs(t, b, k2, "o1", h1.attempt, time.Minute)
	mustBeGranted(t, h2)
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
		if i >= 4 {
			owner = "o1" // the same owner twice in a row
		}
		g := mustGrant(t, b, k, owner, time.Minute)
		if g.Token <= last {
			t.Fatalf("grant %d: token %d, want > %d", i, g.Token, last)
		}
		last = g.Token
		if err := b.Release(ctx, g.releaseReq()); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *suite) bInvalid(t *testing.T) {
	b, k := s.newBackend(t), uniq(t)
	ctx := ctxT(t)
	a := newAttempt()
	bad := []backend.AcquireRequest{
		{Key: "", Owner: "o", Attempt: a, TTL: time.Minute},
		{Key: "  ", Owner: "o", Attempt: a, TTL: time.Minute},
		{Key: k + "\x00", Owner: "o", Attempt: a, TTL: time.Minute},
		{Key: k + "\xff", Owner: "o", Attempt: a, TTL: time.Minute},
		{Key: k + strings.Repeat("x", backend.MaxKeyRunes), Owner: "o", Attempt: a, TTL: time.Minute},
		{Key: k, Owner: "", Attempt: a, TTL: time.Minute},
		{Key: k, Owner: "o", Attempt: "", TTL: time.Minute},
		{Key: k, Owner: "o", Attempt: "with space", TTL: time.Minute},
		{Key: k, Owner: "o", Attempt: strings.Repeat("a", backend.MaxAttemptBytes+1), TTL: time.Minute},
		{Key: k, Owner: "o", Attempt: a, TTL: 0},
		{Key: k, Owner: "o", Attempt: a, TTL: backend.MaxTTL + 1},
		{Key: k, Owner: "o", Attempt: a, TTL: time.Minute, Metadata: strings.Repeat("m", backend.MaxMetadataBytes+1)},
	}
	for _, r := range bad {
		if g, err := b.Acquire(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Acquire(%.80q…) = %+v, %v; want ErrInvalidRequest", fmt.Sprint(r), g, err)
		}
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: k, Owner: "o", Attempt: a, Token: 0, TTL: time.Minute}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Renew with token 0 = %v, want ErrInvalidRequest", err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: k, Owner: "o", Token: 1, TTL: time.Minute}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Renew without an attempt = %v, want ErrInvalidRequest", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: k, Owner: "o", Token: 1}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Release without an attempt = %v, want ErrInvalidRequest", err)
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
	grants := map[string]held{}
	for _, key := range keys {
		grants[key] = mustGrant(t, b, key, "o1", time.Minute)
	}
	for _, key := range keys {
		mustBeBusyBy(t, acquire(t, b, key, "o2", time.Minute), grants[key], time.Minute)
		r, err := b.Renew(ctx, grants[key].renewReq(time.Minute))
		if err != nil || r.Token != grants[key].Token {
			t.Errorf("key %q: renew = %+v, %v", key, r, err)
		}
	}
	// Releasing one key frees exactly that key.
	victim := k + "Foo"
	if err := b.Release(ctx, grants[victim].releaseReq()); err != nil {
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
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: k, Owner: "o1", Attempt: newAttempt(), TTL: time.Minute, Metadata: md})
	if err != nil || !g.Acquired {
		t.Fatalf("metadata at the limit: %+v, %v", g, err)
	}
}

func (s *suite) bConcurrent(t *testing.T) {
	s.concurrentWinners(t, func(i int) string { return fmt.Sprintf("o%d", i) })
}

// Sixteen attempts of one owner at once (sixteen Managers configured with the
// same owner): exactly one holds.
func (s *suite) bConcurrentSameOwner(t *testing.T) {
	s.concurrentWinners(t, func(int) string { return "o1" })
}

func (s *suite) concurrentWinners(t *testing.T, owner func(i int) string) {
	b, k := s.newBackend(t), uniq(t)
	const n = 16
	var wg sync.WaitGroup
	wins := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			a := newAttempt()
			g, err := b.Acquire(context.Background(), backend.AcquireRequest{Key: k, Owner: owner(i), Attempt: a, TTL: time.Minute})
			if err != nil {
				t.Errorf("%s: %v", a, err)
			}
			if g.Acquired {
				wins <- a
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
	if !b.Info().AnnouncesReleases {
		t.Skipf("%s has no release notifications (waiters poll)", b.Info().Name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() { done <- b.WatchReleases(ctx, func(key string) { got <- key }) }()
	defer func() {
		cancel()
		<-done
	}()
	// Subscriptions are asynchronous: release until a notice arrives. A
	// store may announce only the releases someone waits for (see
	// AcquireRequest.Wait), so a waiting contender is refused first.
	deadline := time.After(s.patience)
	for {
		g := mustGrant(t, b, k, "o1", time.Minute)
		wr, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: k, Owner: "o2", Attempt: newAttempt(), TTL: time.Minute, Wait: true})
		if err != nil || wr.Acquired {
			t.Fatalf("waiting Acquire while held = %+v, %v; want a refusal", wr, err)
		}
		if err := b.Release(ctxT(t), g.releaseReq()); err != nil {
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
