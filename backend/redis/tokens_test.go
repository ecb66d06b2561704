package redis

import (
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

func TestTokenIncreasesOnEveryNewGrantOnly(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	var last uint64
	for i := range 5 {
		g := mustAcquire(t, b, "k", "owner-"+strconv.Itoa(i%2), time.Second)
		if g.Token <= last {
			t.Fatalf("grant %d: token %d <= %d", i, g.Token, last)
		}
		again := mustAcquire(t, b, "k", "owner-"+strconv.Itoa(i%2), time.Second)
		r, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "owner-" + strconv.Itoa(i%2), Token: g.Token, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if again.Token != g.Token || r.Token != g.Token {
			t.Fatalf("re-acquire %d / renew %d changed token %d", again.Token, r.Token, g.Token)
		}
		if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "owner-" + strconv.Itoa(i%2), Token: g.Token}); err != nil {
			t.Fatal(err)
		}
		last = g.Token
	}
	if n := c.Get(ctx, b.TokenKey("k")).Val(); n != strconv.FormatUint(last, 10) {
		t.Fatalf("counter %s, last token %d", n, last)
	}
}

// The counter is seeded from the server's clock in microseconds, so a grant
// after the data was lost still outbids every earlier token.
func TestTokensKeepIncreasingAfterDataLoss(t *testing.T) {
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)

	before := serverTime(t, c)
	g1 := mustAcquire(t, b, "k", "alice", time.Minute)
	if us := uint64(before.UnixMicro()); g1.Token <= us {
		t.Fatalf("first token %d not seeded from server time (%d µs)", g1.Token, us)
	}

	// FLUSHALL: the lease and its counter are gone.
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "bob", time.Minute)
	if g2.Token <= g1.Token {
		t.Fatalf("token after flush %d <= %d", g2.Token, g1.Token)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "alice", Token: g1.Token, TTL: time.Minute}); !isNotHeld(err) {
		t.Fatalf("renew of a flushed lease: %v", err)
	}

	// A crash without persistence.
	s.Restart()
	c.Ping(ctx) // the pooled connection died with the server; let the pool notice
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "bob", Token: g2.Token, TTL: time.Minute}); !isNotHeld(err) {
		t.Fatalf("renew after restart: %v", err)
	}
	g3 := mustAcquire(t, b, "k", "carol", time.Minute)
	if g3.Token <= g2.Token {
		t.Fatalf("token after restart %d <= %d", g3.Token, g2.Token)
	}
}

// With a restart grace, a server that lost its data grants no name whose
// counter is missing until it has been up for the grace: a holder that still
// believes it holds the name (its local deadline is within the TTL) is never
// doubled.
func TestRestartGraceDelaysGrantsAfterDataLoss(t *testing.T) {
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	const ttl = 2 * time.Second
	b := newTestBackend(t, c, WithRestartGrace(ttl))
	ctx := ctxT(t)

	// The test server has just started: a fresh name waits out the grace too.
	// Wait on the server's uptime rather than guessing.
	waitUptime(t, s, ttl)
	g1 := mustAcquire(t, b, "k", "alice", ttl)
	held := time.Now()

	s.Restart()
	c.Ping(ctx)
	restarted := time.Now()

	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "bob", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if g.Acquired {
		t.Fatalf("granted %d right after a restart that lost alice's lease (alice's local deadline is %v away)",
			g.Token, time.Until(held.Add(ttl)))
	}
	if g.Holder != "" || g.HolderExpiresAt.IsZero() {
		t.Fatalf("refusal during the grace = %+v, want no holder and the end of the grace", g)
	}
	if end := serverTime(t, c).Add(ttl); g.HolderExpiresAt.After(end) {
		t.Fatalf("grace ends %v, later than server start + grace (%v)", g.HolderExpiresAt, end)
	}

	// Wait, on the server clock, for the end of the grace; the old holder's
	// lease would have expired by then.
	time.Sleep(time.Until(restarted.Add(ttl)))
	waitUptime(t, s, ttl)
	g2 := mustAcquire(t, b, "k", "bob", ttl)
	if g2.Token <= g1.Token {
		t.Fatalf("token after restart %d <= %d", g2.Token, g1.Token)
	}
	// A name that kept its counter is not held back: release and regrant at once.
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "bob", Token: g2.Token}); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, "k", "carol", ttl)
}

// waitUptime waits until the server has been up for at least d as it reports
// it (whole seconds, rounded down, as the script reads it).
func waitUptime(t *testing.T, s *redistest.Server, d time.Duration) {
	t.Helper()
	c := redistest.NewClient(t, s.Addr())
	deadline := time.Now().Add(d + 5*time.Second)
	for time.Now().Before(deadline) {
		info, err := c.InfoMap(ctxT(t), "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		up, _ := strconv.Atoi(info["Server"]["uptime_in_seconds"])
		left := d - time.Duration(up)*time.Second
		if left <= 0 {
			return
		}
		time.Sleep(min(left, 250*time.Millisecond))
	}
	t.Fatalf("server uptime never reached %v", d)
}
