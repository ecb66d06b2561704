package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/backend"
)

func TestMain(m *testing.M) {
	// go-redis logs dial failures on its own; the fault tests cause many.
	goredis.SetLogger(quietLogger{})
	// A go-redis pool whose server died re-dials it once a second until
	// closed, and notices the close only when it wakes up: a second after the
	// test that killed the server closed its client.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// testPrefix returns a key prefix of its own for one test, so tests sharing
// the Redis at LEASEHOLD_REDIS_ADDR never see each other's keys.
func testPrefix(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "lhtest:" + hex.EncodeToString(b[:]) + ":"
}

// newTestBackend returns a backend on c with a fresh prefix (unless opts set
// one), closed and with its keys deleted at the end of the test.
func newTestBackend(t testing.TB, c goredis.UniversalClient, opts ...Option) *Backend {
	t.Helper()
	prefix := testPrefix(t)
	b, err := New(c, append([]Option{WithKeyPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		_ = b.Close()
		deletePrefix(c, b.cfg.prefix)
	})
	return b
}

func deletePrefix(c goredis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newAttempt returns a fresh attempt identity, as the engine makes one per
// acquire attempt.
func newAttempt() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "att-" + hex.EncodeToString(b[:])
}

// holding is a grant with what names it: Renew and Release requests for it.
type holding struct {
	backend.Grant
	key, owner, attempt string
}

func (h holding) renew(ttl time.Duration) backend.RenewRequest {
	return backend.RenewRequest{Key: h.key, Owner: h.owner, Attempt: h.attempt, Token: h.Token, TTL: ttl}
}

func (h holding) release() backend.ReleaseRequest {
	return backend.ReleaseRequest{Key: h.key, Owner: h.owner, Attempt: h.attempt, Token: h.Token}
}

// mustAcquire grants key to owner in a new attempt, or fails the test.
func mustAcquire(t testing.TB, b *Backend, key, owner string, ttl time.Duration) holding {
	t.Helper()
	return mustAcquireAs(t, b, key, owner, newAttempt(), ttl)
}

// mustAcquireAs is mustAcquire with a given attempt (a retry reuses one).
func mustAcquireAs(t testing.TB, b *Backend, key, owner, attempt string, ttl time.Duration) holding {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, owner, err)
	}
	if !g.Acquired {
		t.Fatalf("Acquire(%q, %q): not acquired, held by %q (token %d) for %v more", key, owner, g.Holder, g.HolderToken, g.HolderExpiresIn)
	}
	if g.Token == 0 {
		t.Fatalf("Acquire(%q, %q): token 0", key, owner)
	}
	return holding{Grant: g, key: key, owner: owner, attempt: attempt}
}

// mustBusy checks that a new attempt of owner is refused because of holder,
// and that the refusal describes the holding in the way.
func mustBusy(t testing.TB, b *Backend, key, owner, holder string) backend.Grant {
	t.Helper()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: newAttempt(), TTL: time.Second})
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, owner, err)
	}
	if g.Acquired {
		t.Fatalf("Acquire(%q, %q): acquired while %q holds it", key, owner, holder)
	}
	if g.Holder != holder {
		t.Fatalf("Acquire(%q, %q): holder %q, want %q", key, owner, g.Holder, holder)
	}
	if g.HolderToken == 0 || g.HolderExpiresAt.IsZero() || g.HolderExpiresIn <= 0 {
		t.Fatalf("Acquire(%q, %q): refusal without the holding's token and expiry: %+v", key, owner, g)
	}
	return g
}

// serverTime is the Redis server's clock, which decides every expiry.
func serverTime(t testing.TB, c goredis.UniversalClient) time.Time {
	t.Helper()
	now, err := c.Time(ctxT(t)).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// holdingTTL is the time the holding of key has left on the server's clock,
// as the scripts read it (CONTRACT.md): the record's exp less TIME, or the
// key's PTTL for a holding in the older layout; 0 when nothing holds the
// name (no record, a free one, or one whose holding expired).
func holdingTTL(t testing.TB, c goredis.UniversalClient, b *Backend, key string) time.Duration {
	t.Helper()
	ms, err := holdingTTLScript.Run(ctxT(t), c, []string{b.LeaseKey(key)}).Int64()
	if err != nil {
		t.Fatalf("the holding's TTL: %v", err)
	}
	return time.Duration(ms) * time.Millisecond
}

var holdingTTLScript = goredis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'v', 'owner', 'exp')
if cur[1] then
	if cur[2] == '' then return 0 end
	local t = redis.call('TIME')
	return math.max(0, tonumber(cur[3]) - (t[1] * 1000 + math.floor(t[2] / 1000)))
end
if not cur[2] then return 0 end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then return redis.error_reply('lease hash without an expiry') end
return pttl`)

// expireIn shortens the holding of key to d from now on the server's clock
// (d = 0: it expires at once), as if it had been granted for that long.
func expireIn(t testing.TB, c goredis.UniversalClient, b *Backend, key string, d time.Duration) {
	t.Helper()
	err := expireInScript.Run(ctxT(t), c, []string{b.LeaseKey(key)}, d.Milliseconds()).Err()
	if err != nil {
		t.Fatalf("shortening the holding of %q: %v", key, err)
	}
}

var expireInScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'v') ~= '2' then return redis.error_reply('no record') end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'exp', string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[1]))
return 1`)

// counterOf is the fence counter of key as the scripts read it: the record's
// token, or the older layout's counter key when there is no record ("" when
// neither exists).
func counterOf(t testing.TB, c goredis.UniversalClient, b *Backend, key string) string {
	t.Helper()
	ctx := ctxT(t)
	if c.HGet(ctx, b.LeaseKey(key), "v").Val() == "2" {
		return c.HGet(ctx, b.LeaseKey(key), "token").Val()
	}
	return c.Get(ctx, b.TokenKey(key)).Val()
}

// isHeld reports whether a holding of key stands on the server.
func isHeld(t testing.TB, c goredis.UniversalClient, b *Backend, key string) bool {
	t.Helper()
	return holdingTTL(t, c, b, key) > 0
}

// waitExpired waits, on the server's clock, until key's holding has
// expired. Expiry sends no signal, so this polls the time it has left, which
// also says how long to wait.
func waitExpired(t testing.TB, b *Backend, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		left := holdingTTL(t, b.client, b, key)
		if left == 0 {
			return
		}
		time.Sleep(left)
	}
	t.Fatalf("lease %q did not expire", key)
}

func isNotHeld(err error) bool { return errors.Is(err, backend.ErrNotHeld) }

func itoa(i int) string { return strconv.Itoa(i) }

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func itoa64(u uint64) string { return strconv.FormatUint(u, 10) }

// closeAtEnd closes b when the test ends, for a backend made with New: its
// idle I/O goroutines end with it.
func closeAtEnd(t testing.TB, b *Backend) {
	t.Cleanup(func() { _ = b.Close() })
}
