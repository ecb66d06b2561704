package partition_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/postgres"
	"github.com/leasehold/leasehold/backend/redis"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience bounds every wait for something that must happen: generous, so
// that a loaded machine does not fail a test, and finite, so that a broken
// one fails rather than hangs.
const patience = 30 * time.Second

// eventually polls cond until it holds, for state that sends no signal (who
// owns what across members); it fails the test after within.
func eventually(t testing.TB, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond) // polling, not synchronisation: cond has no signal
	}
	return time.Since(start)
}

func await[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("%s did not happen within %v", what, patience)
		var zero T
		return zero
	}
}

// uniqueGroup names a group no earlier run used, for the shared stores.
func uniqueGroup(what string) string {
	return fmt.Sprintf("partition-%s-%d", what, time.Now().UnixNano())
}

func redisAddr() string {
	if addr := os.Getenv("LEASEHOLD_REDIS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// redisBackend is a backend on the local Redis (LEASEHOLD_REDIS_ADDR),
// closed when the test ends.
func redisBackend(t testing.TB) backend.Backend {
	addr := redisAddr()
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatalf("no Redis at %s: %v", addr, err)
		}
		t.Skipf("no Redis at %s: %v", addr, err)
	}
	b, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// postgresBackend is a backend on the local PostgreSQL
// (LEASEHOLD_POSTGRES_DSN), closed when the test ends.
func postgresBackend(t testing.TB) backend.Backend {
	dsn := os.Getenv("LEASEHOLD_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatalf("no PostgreSQL (LEASEHOLD_POSTGRES_DSN): %v", err)
		}
		t.Skipf("no PostgreSQL (LEASEHOLD_POSTGRES_DSN): %v", err)
	}
	t.Cleanup(pool.Close)
	const schema, table = "partition_test", "leases"
	if err := postgres.EnsureSchema(ctx, pool, schema, table); err != nil {
		t.Fatal(err)
	}
	b, err := postgres.New(pool, postgres.WithTable(schema, table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
