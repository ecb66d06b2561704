package soak_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/backend/redis"
)

var (
	soakFor      = flag.Duration("soak.duration", 2*time.Second, "how long each TestSoak backend runs (make test: the default; make soak: minutes)")
	soakBackends = flag.String("soak.backends", "memory,redis", "which backends TestSoak runs on, comma-separated (memory, redis)")
)

// TestSoak: a lease on a healthy store is never lost. Two Managers share a
// store; each keeps a few long-lived leases (held throughout, renewing every
// second), leases held for a few renewals and released, and many short jobs
// (random TTLs of seconds to a minute, released within milliseconds: before
// their first renewal, each leaving a stale slot in the renewer), in bursts
// of a second with quiet spells of two between. Asserted
// throughout: no loss event, no failed renewal, every acquire and release
// answered nil, HealthCheck nil at every probe (every 50 ms); at the end,
// every long-lived lease still held. Redis: the server at
// LEASEHOLD_REDIS_ADDR (default 127.0.0.1:6379).
func TestSoak(t *testing.T) {
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			if !soakOn(name) {
				t.Skipf("not in -soak.backends %q", *soakBackends)
			}
			soak(t, soakBackend(t, name))
		})
	}
}

func soakOn(name string) bool { return slices.Contains(strings.Split(*soakBackends, ","), name) }

// soakBackend is a fresh store of kind name, closed (and, on Redis, its keys
// deleted) when the test ends.
func soakBackend(t *testing.T, name string) backend.Backend {
	if name == "memory" {
		return memory.New()
	}
	addr := cmp.Or(os.Getenv("LEASEHOLD_REDIS_ADDR"), "127.0.0.1:6379")
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatalf("no Redis at %s (LEASEHOLD_REDIS_ADDR): %v", addr, err)
		}
		t.Skipf("no Redis at %s (LEASEHOLD_REDIS_ADDR): %v", addr, err)
	}
	prefix := fmt.Sprintf("lhsoak:%x:", rand.Uint64())
	b, err := redis.New(c, redis.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return b
}

const (
	soakManagers   = 2
	soakLongLived  = 4 // per Manager, held throughout
	soakJobWorkers = 6 // per Manager
	soakLongTTL    = 3 * time.Second
)

// soakCounts are what a soak did, for its log line.
type soakCounts struct {
	jobs, medium, probes, unhealthy atomic.Int64
}

func soak(t *testing.T, b backend.Backend) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = provider.Shutdown(ctx) }()
	var ms []*leasehold.Manager
	for i := range soakManagers {
		m, err := leasehold.New(b, leasehold.WithOwner(fmt.Sprint("soak", i)), leasehold.WithMeterProvider(provider))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := m.Close(cctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
		ms = append(ms, m)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var counts soakCounts
	var long []*leasehold.Lease
	start := time.Now()
	for i, m := range ms {
		sub := m.Subscribe(16)
		wg.Go(func() { // any loss on a healthy store fails the soak
			for {
				select {
				case ev := <-sub.Events():
					t.Errorf("lost on a healthy store: %+v", ev)
				case <-stop:
					return
				}
			}
		})
		for j := range soakLongLived {
			l, err := m.Acquire(ctx, fmt.Sprintf("long-%d-%d", i, j), leasehold.WithTTL(soakLongTTL))
			if err != nil {
				t.Fatal(err)
			}
			long = append(long, l)
		}
		for w := range soakJobWorkers {
			wg.Go(func() { soakJobs(t, m, fmt.Sprintf("%d-%d", i, w), start, stop, &counts) })
		}
		wg.Go(func() { soakMedium(t, m, fmt.Sprint(i), stop, &counts) })
	}
	wg.Go(func() { // the probe a liveness check would make
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				for _, m := range ms {
					if err := m.HealthCheck(); err != nil && counts.unhealthy.Add(1) <= 3 { // the first few say why
						t.Errorf("HealthCheck on a healthy store: %v", err)
					}
				}
				counts.probes.Add(1)
			case <-stop:
				return
			}
		}
	})
	time.Sleep(*soakFor) // the soak's own length, not a synchronisation
	close(stop)
	wg.Wait()
	for _, l := range long {
		if err := l.Err(); err != nil {
			t.Errorf("long-lived lease %s: %v", l.Name(), err)
		}
	}
	ok, failed, losses := soakMetrics(t, reader)
	t.Logf("%v on %s: %d short jobs, %d leases held for a few renewals, %d long-lived; renewals %d confirmed, %d failed; %d losses; %d health probes, %d unhealthy",
		*soakFor, b.Info().Name, counts.jobs.Load(), counts.medium.Load(), len(long), ok, failed, losses, counts.probes.Load(), counts.unhealthy.Load())
	if failed != 0 || losses != 0 || counts.unhealthy.Load() != 0 {
		t.Errorf("%d failed renewals, %d losses and %d unhealthy probes on a healthy store", failed, losses, counts.unhealthy.Load())
	}
	if min := int64(soakFor.Seconds()) * int64(len(long)) / 2; ok < min {
		t.Errorf("%d renewals confirmed, want at least %d (the long-lived leases renew every second)", ok, min)
	}
}

// Short jobs come in bursts with quiet spells between, as from cron or
// batch work: a renewal scheduled in a quiet spell has no churn after it to
// hide a fault of the renewer's bookkeeping.
const (
	soakBurst = time.Second
	soakQuiet = 2 * time.Second
)

// soakJobs takes and releases short jobs in bursts until stop: each released
// within a few milliseconds, long before its first renewal is due.
func soakJobs(t *testing.T, m *leasehold.Manager, id string, start time.Time, stop <-chan struct{}, counts *soakCounts) {
	rng := rand.New(rand.NewPCG(uint64(len(id)), uint64(id[0])<<8|uint64(id[len(id)-1])))
	for n := 0; ; n++ {
		wait := time.Duration(0)
		if in := time.Since(start) % (soakBurst + soakQuiet); in >= soakBurst {
			wait = soakBurst + soakQuiet - in
		}
		select {
		case <-stop:
			return
		case <-time.After(wait): // the quiet spell, if in one
		}
		ttl := time.Duration(1+rng.IntN(60)) * time.Second
		l, err := m.Acquire(context.Background(), fmt.Sprintf("job-%s-%d", id, n%50), leasehold.WithTTL(ttl))
		if err != nil {
			t.Errorf("job acquire on a healthy store: %v", err)
			return
		}
		select { // the work, which stops when the lease is lost, as a user's must
		case <-time.After(time.Duration(rng.IntN(2000)) * time.Microsecond):
		case <-l.Lost():
		}
		if err := l.Release(context.Background()); err != nil {
			t.Errorf("job release: %v", err)
			return
		}
		counts.jobs.Add(1)
	}
}

// soakMedium holds a lease for a few renewals, releases it and takes the next,
// until stop.
func soakMedium(t *testing.T, m *leasehold.Manager, id string, stop <-chan struct{}, counts *soakCounts) {
	for n := 0; ; n++ {
		l, err := m.Acquire(context.Background(), fmt.Sprintf("medium-%s-%d", id, n%5), leasehold.WithTTL(time.Second))
		if err != nil {
			t.Errorf("acquire on a healthy store: %v", err)
			return
		}
		select {
		case <-stop:
		case <-time.After(time.Duration(1000+rand.IntN(1000)) * time.Millisecond): // three to six renewals
		}
		if err := l.Release(context.Background()); err != nil {
			t.Errorf("release: %v", err)
		}
		counts.medium.Add(1)
		select {
		case <-stop:
			return
		default:
		}
	}
}

// soakMetrics reads the renewals (confirmed, failed) and losses counters.
func soakMetrics(t *testing.T, reader *sdkmetric.ManualReader) (ok, failed, losses int64) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			sum, isSum := mt.Data.(metricdata.Sum[int64])
			if !isSum {
				continue
			}
			for _, dp := range sum.DataPoints {
				switch mt.Name {
				case "leasehold.renewals":
					if v, _ := dp.Attributes.Value("leasehold.outcome"); v.AsString() == "ok" {
						ok += dp.Value
					} else {
						failed += dp.Value
					}
				case "leasehold.losses":
					losses += dp.Value
				}
			}
		}
	}
	return ok, failed, losses
}
