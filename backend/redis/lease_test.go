package redis

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

func TestInfo(t *testing.T) {
	b, err := New(redistest.NewClient(t, "127.0.0.1:1"), WithEvictionAllowed())
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b)
	if got := b.Info(); got.Name != "redis" || got.ProcessLocal {
		t.Fatalf("Info() = %+v", got)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	c := redistest.NewClient(t, "127.0.0.1:1")
	for name, opts := range map[string][]Option{
		"brace in prefix":    {WithKeyPrefix("app{x}:")},
		"negative replicas":  {WithReplicaConfirmation(-1, time.Second)},
		"no confirm timeout": {WithReplicaConfirmation(1, 0)},
		"negative grace":     {WithRestartGrace(-time.Second)},
	} {
		// Options are checked before the server is asked anything: nothing
		// listens at port 1.
		if _, err := New(c, opts...); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: New error = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := New(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
}

func TestAcquireRenewRelease(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)

	before := serverTime(t, c)
	g := mustAcquire(t, b, "job", "alice", time.Minute)
	after := serverTime(t, c)
	if g.ExpiresAt.Before(before.Add(time.Minute-time.Millisecond)) || g.ExpiresAt.After(after.Add(time.Minute+time.Millisecond)) {
		t.Fatalf("ExpiresAt %v not server time + TTL (server time %v..%v)", g.ExpiresAt, before, after)
	}
	if left := holdingTTL(t, c, b, "job"); left > time.Minute || left < 50*time.Second {
		t.Fatalf("time left on the server = %v, want about a minute", left)
	}
	stored := c.HGetAll(ctx, b.LeaseKey("job")).Val()
	if stored["v"] != "2" || stored["owner"] != "alice" || stored["att"] != g.attempt || stored["token"] != itoa64(g.Token) ||
		stored["exp"] != strconv.FormatInt(g.ExpiresAt.UnixMilli(), 10) {
		t.Fatalf("lease hash %v, want alice's holding %s/%d", stored, g.attempt, g.Token)
	}

	// A refusal describes the holding in the way, on the server's clock.
	before = serverTime(t, c)
	busy := mustBusy(t, b, "job", "bob", "alice")
	after = serverTime(t, c)
	if busy.HolderToken != g.Token {
		t.Fatalf("HolderToken %d, holder's token %d", busy.HolderToken, g.Token)
	}
	if d := busy.HolderExpiresAt.Sub(g.ExpiresAt); d < -2*time.Millisecond || d > 2*time.Millisecond {
		t.Fatalf("HolderExpiresAt %v, holder's ExpiresAt %v", busy.HolderExpiresAt, g.ExpiresAt)
	}
	// HolderExpiresIn is what was left when the server answered: between
	// what was left at the two TIME readings around the call.
	if lo, hi := g.ExpiresAt.Sub(after)-2*time.Millisecond, g.ExpiresAt.Sub(before)+2*time.Millisecond; busy.HolderExpiresIn < lo || busy.HolderExpiresIn > hi {
		t.Fatalf("HolderExpiresIn %v, want within [%v, %v]", busy.HolderExpiresIn, lo, hi)
	}

	r, err := b.Renew(ctx, g.renew(2*time.Minute))
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if !r.Acquired || r.Token != g.Token || !r.ExpiresAt.After(g.ExpiresAt) {
		t.Fatalf("Renew = %+v, first grant %+v", r, g)
	}
	if left := holdingTTL(t, c, b, "job"); left <= time.Minute {
		t.Fatalf("time left after renew = %v", left)
	}

	// Whatever does not name alice's holding exactly can neither renew nor
	// release it: another owner, another attempt of alice's, a stale token.
	for name, h := range map[string]holding{
		"foreign owner": {Grant: g.Grant, key: "job", owner: "bob", attempt: g.attempt},
		"other attempt": {Grant: g.Grant, key: "job", owner: "alice", attempt: newAttempt()},
		"stale token":   {Grant: backend.Grant{Token: g.Token + 1}, key: "job", owner: "alice", attempt: g.attempt},
	} {
		if _, err := b.Renew(ctx, h.renew(time.Second)); !isNotHeld(err) {
			t.Fatalf("%s: Renew: %v", name, err)
		}
		if err := b.Release(ctx, h.release()); err != nil {
			t.Fatalf("%s: Release: %v", name, err)
		}
		if h.Token == g.Token {
			zero := h.release()
			zero.Token = 0
			if err := b.Release(ctx, zero); err != nil {
				t.Fatalf("%s: Release token 0: %v", name, err)
			}
		}
		mustBusy(t, b, "job", "bob", "alice")
	}

	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if _, err := b.Renew(ctx, g.renew(time.Second)); !isNotHeld(err) {
		t.Fatalf("Renew after release: %v", err)
	}
	g2 := mustAcquire(t, b, "job", "bob", time.Minute)
	if g2.Token <= g.Token {
		t.Fatalf("token after release %d <= %d", g2.Token, g.Token)
	}
}

// Only the same attempt refreshes its holding (a retry): same token, new
// expiry and metadata. The same owner in another attempt is another contender.
func TestSameAttemptRefreshesSameOwnerDoesNot(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	g1 := mustAcquire(t, b, "k", "alice", time.Minute)
	g2, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "alice", Attempt: g1.attempt, TTL: 2 * time.Minute, Metadata: "second"})
	if err != nil || !g2.Acquired {
		t.Fatalf("retry of the same attempt: %+v, %v", g2, err)
	}
	if g2.Token != g1.Token {
		t.Fatalf("retry changed the token: %d -> %d", g1.Token, g2.Token)
	}
	if !g2.ExpiresAt.After(g1.ExpiresAt) {
		t.Fatalf("retry did not refresh: %v -> %v", g1.ExpiresAt, g2.ExpiresAt)
	}
	if m := c.HGet(ctx, b.LeaseKey("k"), "meta").Val(); m != "second" {
		t.Fatalf("metadata = %q", m)
	}

	busy := mustBusy(t, b, "k", "alice", "alice")
	if busy.HolderToken != g1.Token {
		t.Fatalf("the same owner's other attempt was refused with token %d, holder has %d", busy.HolderToken, g1.Token)
	}
	// The same attempt under another owner name is not the holding either.
	other, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "bob", Attempt: g1.attempt, TTL: time.Minute})
	if err != nil || other.Acquired || other.Holder != "alice" {
		t.Fatalf("bob with alice's attempt: %+v, %v", other, err)
	}
	if m := c.HGet(ctx, b.LeaseKey("k"), "meta").Val(); m != "second" {
		t.Fatalf("a refused acquire changed the metadata to %q", m)
	}
}

// Token 0 releases whatever this attempt holds, and nothing of anyone else:
// not the same owner's other attempt.
func TestReleaseTokenZeroReleasesOnlyThatAttempt(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "alice", time.Minute)
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "alice", Attempt: newAttempt()}); err != nil {
		t.Fatal(err)
	}
	mustBusy(t, b, "k", "bob", "alice")
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "alice", Attempt: g.attempt}); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "bob", time.Minute)
	if g2.Token <= g.Token {
		t.Fatalf("token %d after %d", g2.Token, g.Token)
	}
}

func TestExpiryFreesTheName(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	g := mustAcquire(t, b, "k", "alice", time.Minute)
	mustBusy(t, b, "k", "bob", "alice")
	// Let the server expire it now rather than waiting out a short TTL that
	// a loaded machine might overrun before the checks above.
	expireIn(t, c, b, "k", 0)
	waitExpired(t, b, "k")
	if _, err := b.Renew(ctx, g.renew(time.Second)); !isNotHeld(err) {
		t.Fatalf("Renew after expiry: %v", err)
	}
	g2 := mustAcquire(t, b, "k", "bob", time.Minute)
	if g2.Token <= g.Token {
		t.Fatalf("token after expiry %d <= %d", g2.Token, g.Token)
	}
	// The expired holder cannot release the new one.
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatal(err)
	}
	mustBusy(t, b, "k", "carol", "bob")
}

func TestDifferentNamesAreIndependent(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	mustAcquire(t, b, "a", "alice", time.Minute)
	mustAcquire(t, b, "b", "bob", time.Minute)
	mustAcquire(t, b, "A", "bob", time.Minute)
}

func TestClosedBackend(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := ctxT(t)
	if _, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: time.Second}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "o", Attempt: "a", Token: 1, TTL: time.Second}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Renew after Close: %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "o", Attempt: "a"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Release after Close: %v", err)
	}
	if err := b.WatchReleases(ctx, func(string) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("WatchReleases after Close: %v", err)
	}
	if n := c.Exists(ctx, b.LeaseKey("k"), b.TokenKey("k")).Val(); n != 0 {
		t.Fatalf("a closed backend touched the store")
	}
}
