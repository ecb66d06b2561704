package etcd_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/etcd/internal/etcdtest"
)

// TestMeasureLatency prints the latency of each call on a three-member
// cluster on loopback (the numbers in the README, BENCHMARKS.md and
// docs/backends/etcd.md). It is not a benchmark and
// asserts nothing; it runs only with LEASEHOLD_ETCD_MEASURE=1:
//
//	cd backend/etcd && LEASEHOLD_ETCD_MEASURE=1 go test -count=1 -run TestMeasureLatency -v .
func TestMeasureLatency(t *testing.T) {
	if os.Getenv("LEASEHOLD_ETCD_MEASURE") != "1" {
		t.Skip("set LEASEHOLD_ETCD_MEASURE=1 to measure")
	}
	c := etcdtest.Start(t, 3)
	b := newBackend(t, c.Client())
	ctx := context.Background()
	const rounds = 300
	var acq, busy, ren, rel []time.Duration
	for i := range rounds {
		key := fmt.Sprint("measure/", i)
		a := fmt.Sprint("a", i)
		start := time.Now()
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "o", Attempt: a, TTL: 10 * time.Second})
		acq = append(acq, time.Since(start))
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		start = time.Now()
		if g2, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "o2", Attempt: "b" + a, TTL: 10 * time.Second}); err != nil || g2.Acquired {
			t.Fatalf("busy Acquire: %+v, %v", g2, err)
		}
		busy = append(busy, time.Since(start))
		start = time.Now()
		if _, err := b.Renew(ctx, backend.RenewRequest{Key: key, Owner: "o", Attempt: a, Token: g.Token, TTL: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
		ren = append(ren, time.Since(start))
		start = time.Now()
		if err := b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o", Attempt: a, Token: g.Token}); err != nil {
			t.Fatal(err)
		}
		rel = append(rel, time.Since(start))
	}
	report(t, "Acquire (free key)", acq)
	report(t, "Acquire (busy key)", busy)
	report(t, "Renew", ren)
	report(t, "Release", rel)

	// What an application sees: Manager.Acquire + Release of a free name.
	m := newManager(t, b, "measure")
	var cycle []time.Duration
	for i := range rounds {
		start := time.Now()
		l, err := m.Acquire(ctx, fmt.Sprint("cycle/", i), leasehold.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		cycle = append(cycle, time.Since(start))
	}
	report(t, "Manager acquire+release cycle", cycle)

	// 100 holdings renewed one Renew at a time, and in one RenewBatch.
	const n = 100
	var rs []backend.RenewRequest
	for i := range n {
		key, a := fmt.Sprint("batch/", i), fmt.Sprint("a", i)
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "o", Attempt: a, TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		rs = append(rs, backend.RenewRequest{Key: key, Owner: "o", Attempt: a, Token: g.Token, TTL: time.Minute})
	}
	var one, batch []time.Duration
	for range 20 {
		start := time.Now()
		for _, r := range rs {
			if _, err := b.Renew(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		one = append(one, time.Since(start))
		start = time.Now()
		res, err := b.RenewBatch(ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		batch = append(batch, time.Since(start))
	}
	report(t, "100 renewals, one Renew each", one)
	report(t, "100 renewals, one RenewBatch", batch)
}

func report(t *testing.T, what string, ds []time.Duration) {
	slices.Sort(ds)
	p := func(q float64) time.Duration { return ds[int(q*float64(len(ds)-1))].Round(10 * time.Microsecond) }
	t.Logf("%-32s p50 %-9v p90 %-9v p99 %-9v (n=%d)", what, p(0.5), p(0.9), p(0.99), len(ds))
}
