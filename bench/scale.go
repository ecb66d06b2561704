package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
	lhpostgres "github.com/leasehold/leasehold/backend/postgres"
	lhredis "github.com/leasehold/leasehold/backend/redis"
	"github.com/leasehold/leasehold/internal/backoff"
)

// Scale mode: one process acquires N leases and keeps them alive for a while;
// what does that cost? Side by side, on Redis, the same number of locks kept
// alive the way github.com/bsm/redislock users do it: one Refresh per lock per
// period, each on its own timer.

// scaleConfig is one scale run.
type scaleConfig struct {
	Backend     string
	RedisAddr   string
	PostgresDSN string
	Leases      int
	TTL         time.Duration
	RenewEvery  time.Duration
	Duration    time.Duration // how long the leases are kept alive after all are held
	CPUProfile  string        // when set, leasehold's hold phase is profiled to this file
	Peer        bool          // also run redislock (Redis only)
}

// scaleResult is what one system measured in a scale run.
type scaleResult struct {
	System        string  `json:"system"`
	Backend       string  `json:"backend"`
	Leases        int     `json:"leases"`
	AcquireAllSec float64 `json:"acquire_all_s"`
	// CloseSec is how long giving every lease back took: Manager.Close
	// with every lease held, for leasehold; stopping and releasing each
	// lock, for a peer.
	CloseSec         float64 `json:"close_s"`
	RenewalsPerSec   float64 `json:"renewals_per_s"`
	RoundTripsPerSec float64 `json:"round_trips_per_s"`
	CPUCores         float64 `json:"cpu_cores"` // process CPU seconds per second of the hold phase
	// HeapPerLease is the heap growth from before the first acquire to
	// the end of the hold phase, every lease still held, divided by the
	// leases (goroutine stacks are not heap); SetupHeap is what the client and (for leasehold) the Manager
	// cost before the first acquire, counted apart since it does not grow
	// with the leases.
	HeapPerLease float64 `json:"heap_bytes_per_lease"`
	SetupHeap    float64 `json:"setup_heap_bytes"`
	Losses       int     `json:"losses"`
	// LossCauses counts losses by reason and error (leasehold only).
	LossCauses map[string]int `json:"loss_causes,omitempty"`
}

// scaleAcquirers is how many goroutines acquire the leases at the start.
const scaleAcquirers = 16

// runScale runs leasehold (and, when asked, the redislock peer) at scale.
func runScale(ctx context.Context, c scaleConfig, progress func(string)) ([]scaleResult, error) {
	if c.Leases <= 0 || c.TTL <= 0 || c.RenewEvery <= 0 || c.RenewEvery >= c.TTL || c.Duration <= 0 {
		return nil, fmt.Errorf("%w: scale needs leases > 0 and 0 < renew < ttl, duration > 0", errConfig)
	}
	prefix := "lhscale:" + scaleRandom() + ":"
	var out []scaleResult
	r, err := scaleLeasehold(ctx, c, prefix, progress)
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	switch {
	case c.Peer && c.Backend == backendRedis:
		r, err := scaleRedislock(ctx, c, prefix, progress)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	case c.Peer && c.Backend == backendMemory:
		r, err := scaleGoroutinePerLock(ctx, c, prefix, progress)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func scaleLeasehold(ctx context.Context, c scaleConfig, prefix string, progress func(string)) (scaleResult, error) {
	res := scaleResult{System: lockLeasehold, Backend: c.Backend, Leases: c.Leases}
	var raw backend.Backend
	var cleanup func()
	switch c.Backend {
	case backendMemory:
		raw, cleanup = memory.New(), func() {}
	case backendRedis:
		client := redisClient(runConfig{RedisAddr: c.RedisAddr, Goroutines: 64})
		b, err := lhredis.New(client)
		if err != nil {
			client.Close()
			return res, err
		}
		raw, cleanup = b, func() { b.Close(); client.Close() }
	case backendPostgres:
		pool, err := postgresPool(ctx, runConfig{PostgresDSN: c.PostgresDSN, Goroutines: 64})
		if err != nil {
			return res, err
		}
		schema := "lhscale_" + scaleRandom()
		if err := lhpostgres.EnsureSchema(ctx, pool, schema, lhpostgres.DefaultTable); err != nil {
			pool.Close()
			return res, err
		}
		b, err := lhpostgres.New(pool, lhpostgres.WithTable(schema, lhpostgres.DefaultTable))
		if err != nil {
			pool.Close()
			return res, err
		}
		raw, cleanup = b, func() {
			_, _ = pool.Exec(context.Background(), fmt.Sprintf("DROP SCHEMA %q CASCADE", schema))
			pool.Close()
		}
	default:
		return res, fmt.Errorf("%w: scale mode runs on memory, redis or postgres, not %q", errConfig, c.Backend)
	}
	defer cleanup()

	var counts lockStats
	setup0 := scaleHeap()
	m, err := leasehold.New(renewCounting{raw, &counts}, leasehold.WithKeyPrefix(prefix))
	if err != nil {
		return res, err
	}
	closed := false
	defer func() {
		if !closed {
			m.Close(context.Background())
		}
	}()
	sub := m.Subscribe(c.Leases)
	defer sub.Close()
	heap0 := scaleHeap()
	res.SetupHeap = float64(int64(heap0) - int64(setup0))

	start := time.Now()
	leases := make([]*leasehold.Lease, c.Leases)
	// Acquire on fewer goroutines than the connection pool has connections,
	// so that renewals of the leases already held always find one (with the
	// pool saturated by acquires, renewals queue past their deadlines and the
	// leases are lost: safe, but not what this run measures).
	err = scaleParallel(ctx, c.Leases, scaleAcquirers, func(i int) error {
		l, err := m.Acquire(ctx, fmt.Sprint("lease-", i), leasehold.WithTTL(c.TTL), leasehold.WithRenewEvery(c.RenewEvery))
		leases[i] = l
		return err
	})
	if err != nil {
		return res, err
	}
	res.AcquireAllSec = time.Since(start).Seconds()
	progress(fmt.Sprintf("leasehold: %d leases held after %.2fs; keeping them for %v", c.Leases, res.AcquireAllSec, c.Duration))

	stopProfile, err := startCPUProfile(c.CPUProfile)
	if err != nil {
		return res, err
	}
	rt0, rn0, cpu0, t0 := counts.roundTrips.Load(), counts.renewals.Load(), scaleCPU(), time.Now()
	err = backoff.Sleep(ctx, c.Duration)
	stopProfile()
	if err != nil {
		return res, err
	}
	secs := time.Since(t0).Seconds()
	res.RoundTripsPerSec = float64(counts.roundTrips.Load()-rt0) / secs
	res.RenewalsPerSec = float64(counts.renewals.Load()-rn0) / secs
	res.CPUCores = (scaleCPU() - cpu0).Seconds() / secs
	res.HeapPerLease = float64(int64(scaleHeap())-int64(heap0)) / float64(c.Leases)
	for _, l := range leases {
		if l.Err() != nil {
			res.Losses++
		}
	}
	res.LossCauses = map[string]int{}
	for len(sub.Events()) > 0 {
		ev := <-sub.Events()
		res.LossCauses[ev.Reason.String()+": "+ev.Err.Error()]++
	}
	closing := time.Now()
	closed = true
	err = m.Close(ctx)
	res.CloseSec = time.Since(closing).Seconds()
	return res, err
}

// scaleGoroutinePerLock keeps N locks alive on the memory store the way a
// program without a lease manager holds many: one goroutine, ticker and
// Renew per lock, straight on the store (redislock's shape, where redislock
// does not run).
func scaleGoroutinePerLock(ctx context.Context, c scaleConfig, prefix string, progress func(string)) (scaleResult, error) {
	res := scaleResult{System: lockGoroutinePerLock, Backend: c.Backend, Leases: c.Leases}
	var renewals, losses atomic.Int64
	setup0 := scaleHeap()
	store := memory.New()
	heap0 := scaleHeap()
	res.SetupHeap = float64(int64(heap0) - int64(setup0))
	start := time.Now()
	held := make([]backend.RenewRequest, c.Leases)
	err := scaleParallel(ctx, c.Leases, scaleAcquirers, func(i int) error {
		r := backend.AcquireRequest{Key: fmt.Sprint(prefix, "peer-", i), Owner: "peer", Attempt: fmt.Sprint("a", i), TTL: c.TTL}
		g, err := store.Acquire(ctx, r)
		if err == nil && !g.Acquired {
			err = fmt.Errorf("goroutine-per-lock: %s busy", r.Key)
		}
		held[i] = backend.RenewRequest{Key: r.Key, Owner: r.Owner, Attempt: r.Attempt, Token: g.Token, TTL: c.TTL}
		return err
	})
	if err != nil {
		return res, err
	}
	res.AcquireAllSec = time.Since(start).Seconds()
	hold, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, r := range held {
		wg.Go(func() {
			tickRenew(hold, c.RenewEvery, &losses, func(ctx context.Context) error {
				renewals.Add(1)
				_, err := store.Renew(ctx, r)
				return err
			})
		})
	}
	progress(fmt.Sprintf("goroutine-per-lock: %d locks held after %.2fs; renewing them for %v", c.Leases, res.AcquireAllSec, c.Duration))
	rn0, cpu0, t0 := renewals.Load(), scaleCPU(), time.Now()
	err = backoff.Sleep(ctx, c.Duration)
	secs := time.Since(t0).Seconds()
	res.RenewalsPerSec = float64(renewals.Load()-rn0) / secs
	res.RoundTripsPerSec = res.RenewalsPerSec
	res.CPUCores = (scaleCPU() - cpu0).Seconds() / secs
	res.HeapPerLease = float64(int64(scaleHeap())-int64(heap0)) / float64(c.Leases)
	closing := time.Now()
	stop()
	wg.Wait()
	res.Losses = int(losses.Load())
	_ = scaleParallel(context.Background(), c.Leases, 64, func(i int) error {
		return store.Release(context.Background(), backend.ReleaseRequest{Key: held[i].Key, Owner: held[i].Owner, Attempt: held[i].Attempt, Token: held[i].Token})
	})
	res.CloseSec = time.Since(closing).Seconds()
	return res, err
}

// scaleRedislock keeps N redislock locks alive with one Refresh per lock per
// period, the way its README shows.
func scaleRedislock(ctx context.Context, c scaleConfig, prefix string, progress func(string)) (scaleResult, error) {
	res := scaleResult{System: lockRedislock, Backend: c.Backend, Leases: c.Leases}
	var roundTrips, refreshes, losses atomic.Int64
	setup0 := scaleHeap()
	client := redisClient(runConfig{RedisAddr: c.RedisAddr, Goroutines: 64})
	defer client.Close()
	locker := redislock.New(client)
	heap0 := scaleHeap()
	res.SetupHeap = float64(int64(heap0) - int64(setup0))
	start := time.Now()
	locks := make([]*redislock.Lock, c.Leases)
	err := scaleParallel(ctx, c.Leases, scaleAcquirers, func(i int) error {
		roundTrips.Add(1)
		l, err := locker.Obtain(ctx, fmt.Sprint(prefix, "redislock-", i), c.TTL, nil)
		locks[i] = l
		return err
	})
	if err != nil {
		return res, err
	}
	res.AcquireAllSec = time.Since(start).Seconds()
	hold, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Go(func() {
			tickRenew(hold, c.RenewEvery, &losses, func(ctx context.Context) error {
				roundTrips.Add(1)
				refreshes.Add(1)
				return l.Refresh(ctx, c.TTL, nil)
			})
		})
	}
	progress(fmt.Sprintf("redislock: %d locks held after %.2fs; refreshing them for %v", c.Leases, res.AcquireAllSec, c.Duration))
	rt0, rn0, cpu0, t0 := roundTrips.Load(), refreshes.Load(), scaleCPU(), time.Now()
	err = backoff.Sleep(ctx, c.Duration)
	secs := time.Since(t0).Seconds()
	res.RoundTripsPerSec = float64(roundTrips.Load()-rt0) / secs
	res.RenewalsPerSec = float64(refreshes.Load()-rn0) / secs
	res.CPUCores = (scaleCPU() - cpu0).Seconds() / secs
	res.HeapPerLease = float64(int64(scaleHeap())-int64(heap0)) / float64(c.Leases)
	stop()
	wg.Wait()
	res.Losses = int(losses.Load())
	_ = scaleParallel(context.Background(), c.Leases, 64, func(i int) error { return locks[i].Release(context.Background()) })
	return res, err
}

// tickRenew is one lock's goroutine in the peers' design: renew every
// period until hold ends; the first failure (hold still alive) is a loss.
func tickRenew(hold context.Context, period time.Duration, losses *atomic.Int64, renew func(context.Context) error) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-hold.Done():
			return
		case <-t.C:
		}
		if err := renew(hold); err != nil && hold.Err() == nil {
			losses.Add(1)
			return
		}
	}
}

// scaleParallel runs fn(0..n-1) on `workers` goroutines and returns the first error.
func scaleParallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

func scaleHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// scaleCPU is the CPU time this process has used (user + system).
func scaleCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func scaleRandom() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startCPUProfile profiles the process to path until the returned stop (a
// no-op when path is empty).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
