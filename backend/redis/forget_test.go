package redis

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// prefixKeys counts the keys under b's prefix. SCAN leaves out (and
// deletes) the keys whose expiry has passed on the server's clock.
func prefixKeys(t testing.TB, c goredis.UniversalClient, b *Backend) int {
	t.Helper()
	ctx := ctxT(t)
	n := 0
	iter := c.Scan(ctx, 0, b.cfg.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return n
}

// forgetTime is when key's record is set to be forgotten (PEXPIRETIME); 0
// when it has no expiry, -1 when there is no record.
func forgetTime(t testing.TB, c goredis.UniversalClient, b *Backend, key string) int64 {
	t.Helper()
	ms, err := c.Do(ctxT(t), "PEXPIRETIME", b.LeaseKey(key)).Int64()
	if err != nil {
		t.Fatalf("PEXPIRETIME: %v", err)
	}
	if ms == -1 {
		return 0
	}
	if ms == -2 {
		return -1
	}
	return ms
}

// awaitServerClock waits until the server's clock has passed ms (Unix
// milliseconds), the moment that decides every expiry; bounded.
func awaitServerClock(t testing.TB, c goredis.UniversalClient, ms int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := time.Duration(ms-serverTime(t, c).UnixMilli()+1) * time.Millisecond
		if left <= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's clock did not reach %d", ms)
		}
		time.Sleep(left)
	}
}

// The records of names acquired and released once, exclusive and shared,
// are forgotten after the forget delay: the keyspace goes back to what it
// was.
func TestReleasedNamesAreForgotten(t *testing.T) {
	c := redistest.Client(t)
	const delay = 200 * time.Millisecond
	b := newTestBackend(t, c, WithForgetAfter(delay))
	ctx := ctxT(t)
	base := prefixKeys(t, c, b)
	var last int64 // the latest forget time set
	for i := range 2000 {
		key, attempt := "job "+itoa(i), newAttempt()
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "alice", Attempt: attempt, TTL: time.Minute, Limit: 1 + i%2})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire(%q): %+v, %v", key, g, err)
		}
		if err := b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "alice", Attempt: attempt, Token: g.Token}); err != nil {
			t.Fatalf("Release(%q): %v", key, err)
		}
		// The record goes no earlier than delay after the token's
		// millisecond (and at once if that has passed).
		want := int64(g.Token/1000) + 1 + delay.Milliseconds()
		if at := forgetTime(t, c, b, key); at != -1 && at != want {
			t.Fatalf("%q (token %d) is forgotten at %d, want %d", key, g.Token, at, want)
		}
		last = max(last, want)
	}
	awaitServerClock(t, c, last)
	if n := prefixKeys(t, c, b); n != base {
		t.Fatalf("%d keys under the prefix after the forget delay, want %d", n, base)
	}
}

// A forgotten name's next token is above every token it had, also when its
// counter ran ahead of the clock (many grants within one microsecond): the
// record outlives its token's millisecond, and the clock floor outbids it.
func TestForgottenNameKeepsTokensIncreasing(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c, WithForgetAfter(0))
	ctx := ctxT(t)
	h := mustAcquire(t, b, "k", "alice", time.Minute)
	// The counter 300 ms ahead of the server's clock, as if the name had
	// been granted many times a microsecond.
	ahead := uint64(serverTime(t, c).UnixMicro()) + 300_000
	if err := c.HSet(ctx, b.LeaseKey("k"), "token", strconv.FormatUint(ahead, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	h.Token = ahead
	if err := b.Release(ctx, h.release()); err != nil {
		t.Fatal(err)
	}
	at := forgetTime(t, c, b, "k")
	if at*1000 <= int64(ahead) {
		t.Fatalf("forgotten at %d ms, not after the token %d µs", at, ahead)
	}
	awaitServerClock(t, c, at)
	if n := c.Exists(ctx, b.LeaseKey("k"), b.TokenKey("k")).Val(); n != 0 {
		t.Fatalf("%d keys of the name after its forget time", n)
	}
	if next := mustAcquire(t, b, "k", "bob", time.Minute); next.Token <= ahead {
		t.Fatalf("token %d after %d", next.Token, ahead)
	}

	// And as it mostly happens: forgotten at once, the clock past it.
	h = mustAcquire(t, b, "once", "alice", time.Minute)
	if err := b.Release(ctx, h.release()); err != nil {
		t.Fatal(err)
	}
	awaitServerClock(t, c, int64(h.Token/1000)+1)
	if next := mustAcquire(t, b, "once", "bob", time.Minute); next.Token <= h.Token {
		t.Fatalf("token %d after %d", next.Token, h.Token)
	}
}

// A name with a holder or a queued waiter is never forgotten: a grant takes
// the expiry off a released record, and so does a waiter queued on a free
// one; a release that hands on leaves none.
func TestHeldOrAwaitedNamesAreKept(t *testing.T) {
	s := redistest.Start(t) // its own, young server: for the restart grace
	c := redistest.NewClient(t, s.Addr())
	const delay = 100 * time.Millisecond
	b := newTestBackend(t, c, WithForgetAfter(delay))
	ctx := ctxT(t)

	// Held again after a release.
	h := mustAcquire(t, b, "held", "alice", time.Minute)
	if err := b.Release(ctx, h.release()); err != nil {
		t.Fatal(err)
	}
	at := forgetTime(t, c, b, "held")
	h = mustAcquire(t, b, "held", "alice", time.Minute)
	if got := forgetTime(t, c, b, "held"); got != 0 {
		t.Fatalf("a held record expires at %d", got)
	}
	// Shared, likewise.
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "shared", Owner: "alice", Attempt: "a1", TTL: time.Minute, Limit: 2})
	if err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "shared", Owner: "alice", Attempt: "a1", Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	if got := forgetTime(t, c, b, "shared"); got <= 0 {
		t.Fatalf("a released shared record: forget time %d", got)
	}
	if g, err = b.Acquire(ctx, backend.AcquireRequest{Key: "shared", Owner: "alice", Attempt: "a2", TTL: time.Minute, Limit: 2}); err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	if got := forgetTime(t, c, b, "shared"); got != 0 {
		t.Fatalf("a held shared record expires at %d", got)
	}

	// A holder with a queued waiter; its release hands on.
	w := mustAcquire(t, b, "awaited", "alice", time.Minute)
	mustQueue(t, b, "awaited", "bob", newAttempt(), queueReq("", 1))

	// A waiter queued on a free record, refused by the restart grace of
	// this young server.
	f := mustAcquire(t, b, "free", "alice", time.Minute)
	if err := b.Release(ctx, f.release()); err != nil {
		t.Fatal(err)
	}
	graced := newTestBackend(t, c, WithKeyPrefix(b.cfg.prefix), WithRestartGrace(time.Hour))
	mustQueue(t, graced, "free", "carol", newAttempt(), queueReq("", 1))
	if got := forgetTime(t, c, b, "free"); got != 0 {
		t.Fatalf("a record with a queued waiter expires at %d", got)
	}

	awaitServerClock(t, c, max(at, int64(w.Token/1000)+1+delay.Milliseconds(), int64(f.Token/1000)+1+delay.Milliseconds()))
	mustHolder(t, b, "held", "alice")
	mustHolder(t, b, "awaited", "alice")
	if hs, err := b.Holders(ctx, "shared"); err != nil || len(hs) != 1 {
		t.Fatalf("Holders(shared) = %+v, %v", hs, err)
	}
	if n := c.Exists(ctx, b.LeaseKey("free")).Val(); n != 1 || len(queued(t, b, "free")) != 1 {
		t.Fatalf("the free record with a queued waiter: %d keys, queue %v", n, queued(t, b, "free"))
	}
	if err := b.Release(ctx, w.release()); err != nil {
		t.Fatal(err)
	}
	mustHolder(t, b, "awaited", "bob")
	if got := forgetTime(t, c, b, "awaited"); got != 0 {
		t.Fatalf("a handed-on record expires at %d", got)
	}
}

// The forget delay is checked: a negative one is refused and names itself.
func TestNegativeForgetDelayIsRefused(t *testing.T) {
	_, err := New(redistest.Client(t), WithForgetAfter(-time.Second), WithEvictionAllowed())
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "forget") {
		t.Fatalf("New with a negative forget delay: %v", err)
	}
}

// TestForgetMemory measures what 100,000 unique names acquired and released
// leave on a server of its own: used_memory and DBSIZE before, after the
// churn, and after the forget delay. Set LEASEHOLD_REDIS_FORGET_MEASURE=1 to
// run it; it logs the numbers (go test -v).
func TestForgetMemory(t *testing.T) {
	if os.Getenv("LEASEHOLD_REDIS_FORGET_MEASURE") == "" {
		t.Skip("a measurement: set LEASEHOLD_REDIS_FORGET_MEASURE=1")
	}
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	const delay = 2 * time.Second
	b := newTestBackend(t, c, WithForgetAfter(delay))
	ctx := context.Background()
	report := func(when string) {
		info := c.Info(ctx, "memory").Val()
		i := strings.Index(info, "used_memory:")
		used := strings.TrimSpace(strings.SplitN(info[i+len("used_memory:"):], "\n", 2)[0])
		t.Logf("%-22s used_memory %s B, DBSIZE %d", when, used, c.DBSize(ctx).Val())
	}
	report("before")
	const names, chunk = 100_000, 500
	var last uint64
	for i := 0; i < names; i += chunk {
		calls := make([]backend.Call, chunk)
		for j := range calls {
			calls[j] = acquireOp("job "+itoa(i+j), "alice", "a"+itoa(i+j), false)
		}
		b.Batch(ctx, calls)
		rel := make([]backend.Call, chunk)
		for j, cl := range calls {
			if cl.Err != nil || !cl.Grant.Acquired {
				t.Fatalf("acquire %d: %+v, %v", i+j, cl.Grant, cl.Err)
			}
			last = max(last, cl.Grant.Token)
			rel[j] = releaseOp(backend.ReleaseRequest{Key: cl.Acquire.Key, Owner: "alice", Attempt: cl.Acquire.Attempt, Token: cl.Grant.Token})
		}
		b.Batch(ctx, rel)
		for j, cl := range rel {
			if cl.Err != nil {
				t.Fatalf("release %d: %v", i+j, cl.Err)
			}
		}
	}
	report("after the churn")
	awaitServerClock(t, c, int64(last/1000)+1+delay.Milliseconds())
	// Redis deletes expired keys in its background cycle; wait for it
	// (bounded) rather than touching the keys.
	deadline := time.Now().Add(60 * time.Second)
	for c.DBSize(ctx).Val() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	report("after the forget delay")
}
