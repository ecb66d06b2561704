package redistest

import (
	"context"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultAddr is the Redis every development and CI machine runs.
const DefaultAddr = "127.0.0.1:6379"

// Addr returns LEASEHOLD_REDIS_ADDR, or DefaultAddr when it is unset.
func Addr() string {
	if a := os.Getenv("LEASEHOLD_REDIS_ADDR"); a != "" {
		return a
	}
	return DefaultAddr
}

// RequireServices reports whether LEASEHOLD_REQUIRE_SERVICES=1, under which an
// unreachable service fails a test instead of skipping it.
func RequireServices() bool {
	return os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1"
}

// Client returns a client of the shared Redis at Addr(), closed in t.Cleanup.
// It skips (or fails, see RequireServices) when nothing answers there.
func Client(t testing.TB) *goredis.Client {
	t.Helper()
	c := NewClient(t, Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		Unavailable(t, "no Redis at %s (LEASEHOLD_REDIS_ADDR): %v", Addr(), err)
	}
	return c
}

// NewClient returns a client of addr, closed in t.Cleanup. Context deadlines
// bound its socket reads, and it does not retry, so a fault shows up in the
// call that met it.
func NewClient(t testing.TB, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
