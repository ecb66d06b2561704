package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/backend"
	lhredis "github.com/leasehold/leasehold/backend/redis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// benchNames is how many distinct names the benchmarks cycle through.
const benchNames = 1000

// benchClient connects to LEASEHOLD_REDIS_ADDR (default 127.0.0.1:6379) with a
// pool big enough for 64 goroutines; both sides of a comparison get the same
// settings.
func benchClient(b *testing.B) *goredis.Client {
	b.Helper()
	addr := os.Getenv("LEASEHOLD_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 64, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			b.Fatalf("no Redis at %s: %v", addr, err)
		}
		b.Skipf("no Redis at %s: %v; set LEASEHOLD_REQUIRE_SERVICES=1 to fail instead", addr, err)
	}
	return c
}

// runOps runs op b.N times in total over the given number of goroutines, each
// call taking the next of benchNames names. Besides ns/op it reports cpu-ns/op,
// the process's CPU time (user + system, every goroutine and the GC) per op:
// on a loaded machine it moves far less than the wall time.
func runOps(b *testing.B, goroutines int, op func(name string) error) {
	b.Helper()
	names := make([]string, benchNames)
	for i := range names {
		names[i] = "job-" + strconv.Itoa(i)
	}
	var next atomic.Int64
	var failed atomic.Value
	b.ReportAllocs()
	b.ResetTimer()
	cpu := scaleCPU()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(names[i%benchNames]); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(scaleCPU()-cpu)/float64(b.N), "cpu-ns/op")
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRedisAcquireRelease compares, against the same redis-server, one
// acquire+release through a leasehold Manager (actors, Lua scripts, fencing
// token) with the same work done by github.com/bsm/redislock (SET NX + a Lua
// release). A name that is busy (another goroutine has it) counts as done on
// both sides.
func BenchmarkRedisAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run("leasehold/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			c := benchClient(b)
			be, err := lhredis.New(c, lhredis.WithKeyPrefix("lhbench:"))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			benchLeasehold(b, be, g)
		})
		b.Run("redislock/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			c := benchClient(b)
			locker := redislock.New(c)
			ctx := context.Background()
			runOps(b, g, func(name string) error {
				l, err := locker.Obtain(ctx, "lhbench-redislock:"+name, 30*time.Second, nil)
				if errors.Is(err, redislock.ErrNotObtained) {
					return nil
				}
				if err != nil {
					return err
				}
				return l.Release(ctx)
			})
		})
	}
}

// BenchmarkRedisBackendAcquireRelease is the same work on the Redis backend
// alone, without the engine: the difference to the leasehold rows above is
// what the actors cost.
func BenchmarkRedisBackendAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			c := benchClient(b)
			be, err := lhredis.New(c, lhredis.WithKeyPrefix("lhbench-backend:"))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			ctx := context.Background()
			runOps(b, g, func(name string) error {
				gr, err := be.Acquire(ctx, backend.AcquireRequest{Key: name, Owner: "bench", Attempt: "bench", TTL: 30 * time.Second})
				if err != nil || !gr.Acquired {
					return err
				}
				return be.Release(ctx, backend.ReleaseRequest{Key: name, Owner: "bench", Attempt: "bench", Token: gr.Token})
			})
		})
	}
}
