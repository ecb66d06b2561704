package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

func TestInfo(t *testing.T) {
	b, err := New(redistest.NewClient(t, "127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
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
	g := mustAcquire(t, b, "job", "alice", 2*time.Second)
	after := serverTime(t, c)
	if g.ExpiresAt.Before(before.Add(2*time.Second-time.Millisecond)) || g.ExpiresAt.After(after.Add(2*time.Second)) {
		t.Fatalf("ExpiresAt %v not server time + TTL (server time %v..%v)", g.ExpiresAt, before, after)
	}
	pttl := c.PTTL(ctx, b.LeaseKey("job")).Val()
	if pttl <= time.Second || pttl > 2*time.Second {
		t.Fatalf("PTTL on the server = %v, want about 2s", pttl)
	}

	busy := mustBusy(t, b, "job", "bob", "alice")
	if d := busy.HolderExpiresAt.Sub(g.ExpiresAt); d < -5*time.Millisecond || d > 5*time.Millisecond {
		t.Fatalf("HolderExpiresAt %v, holder's ExpiresAt %v", busy.HolderExpiresAt, g.ExpiresAt)
	}

	r, err := b.Renew(ctx, backend.RenewRequest{Key: "job", Owner: "alice", Token: g.Token, TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if !r.Acquired || r.Token != g.Token || !r.ExpiresAt.After(g.ExpiresAt) {
		t.Fatalf("Renew = %+v, first grant %+v", r, g)
	}
	if pttl := c.PTTL(ctx, b.LeaseKey("job")).Val(); pttl <= 4*time.Second {
		t.Fatalf("PTTL after renew = %v", pttl)
	}

	// A foreign owner, or the right owner with a stale token, can neither
	// renew nor release.
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "job", Owner: "bob", Token: g.Token, TTL: time.Second}); !isNotHeld(err) {
		t.Fatalf("foreign Renew: %v", err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "job", Owner: "alice", Token: g.Token + 1, TTL: time.Second}); !isNotHeld(err) {
		t.Fatalf("stale-token Renew: %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "job", Owner: "bob", Token: g.Token}); err != nil {
		t.Fatalf("foreign Release: %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "job", Owner: "bob"}); err != nil {
		t.Fatalf("foreign Release token 0: %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "job", Owner: "alice", Token: g.Token + 1}); err != nil {
		t.Fatalf("stale Release: %v", err)
	}
	mustBusy(t, b, "job", "bob", "alice")

	if err := b.Release(ctx, backend.ReleaseRequest{Key: "job", Owner: "alice", Token: g.Token}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "job", Owner: "alice", Token: g.Token}); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "job", Owner: "alice", Token: g.Token, TTL: time.Second}); !isNotHeld(err) {
		t.Fatalf("Renew after release: %v", err)
	}
	g2 := mustAcquire(t, b, "job", "bob", time.Second)
	if g2.Token <= g.Token {
		t.Fatalf("token after release %d <= %d", g2.Token, g.Token)
	}
}

func TestSameOwnerAcquireIsIdempotent(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	g1 := mustAcquire(t, b, "k", "alice", time.Second)
	g2, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: "k", Owner: "alice", TTL: 3 * time.Second, Metadata: "second"})
	if err != nil || !g2.Acquired {
		t.Fatalf("re-acquire: %+v, %v", g2, err)
	}
	if g2.Token != g1.Token {
		t.Fatalf("re-acquire changed the token: %d -> %d", g1.Token, g2.Token)
	}
	if !g2.ExpiresAt.After(g1.ExpiresAt) {
		t.Fatalf("re-acquire did not refresh: %v -> %v", g1.ExpiresAt, g2.ExpiresAt)
	}
	if m := c.HGet(ctxT(t), b.LeaseKey("k"), "meta").Val(); m != "second" {
		t.Fatalf("metadata = %q", m)
	}
}

func TestReleaseTokenZeroReleasesOwnersHolding(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	g := mustAcquire(t, b, "k", "alice", 10*time.Second)
	if err := b.Release(ctxT(t), backend.ReleaseRequest{Key: "k", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "bob", time.Second)
	if g2.Token <= g.Token {
		t.Fatalf("token %d after %d", g2.Token, g.Token)
	}
}

func TestExpiryFreesTheName(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	g := mustAcquire(t, b, "k", "alice", 50*time.Millisecond)
	mustBusy(t, b, "k", "bob", "alice")
	waitExpired(t, b, "k")
	if _, err := b.Renew(ctxT(t), backend.RenewRequest{Key: "k", Owner: "alice", Token: g.Token, TTL: time.Second}); !isNotHeld(err) {
		t.Fatalf("Renew after expiry: %v", err)
	}
	g2 := mustAcquire(t, b, "k", "bob", time.Second)
	if g2.Token <= g.Token {
		t.Fatalf("token after expiry %d <= %d", g2.Token, g.Token)
	}
	// The expired holder cannot release the new one.
	if err := b.Release(ctxT(t), backend.ReleaseRequest{Key: "k", Owner: "alice", Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	mustBusy(t, b, "k", "carol", "bob")
}

func TestDifferentNamesAreIndependent(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	mustAcquire(t, b, "a", "alice", time.Second)
	mustAcquire(t, b, "b", "bob", time.Second)
	mustAcquire(t, b, "A", "bob", time.Second)
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
	if _, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "o", Token: 1, TTL: time.Second}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Renew after Close: %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "o"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Release after Close: %v", err)
	}
	if err := b.WatchReleases(ctx, func(string) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("WatchReleases after Close: %v", err)
	}
	if n := c.Exists(ctx, b.LeaseKey("k"), b.TokenKey("k")).Val(); n != 0 {
		t.Fatalf("a closed backend touched the store")
	}
}
