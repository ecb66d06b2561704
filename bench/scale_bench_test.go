package main

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// Scale benchmarks: N leases acquired by one process and kept alive (TTL 3s,
// renewed every second) for a few seconds; 100,000 leases on the memory
// backend with TTL 30s, renewed every 10s, kept for 12s (a whole renewal
// round, 10,000 renewals a second). Each iteration is a whole run, so run them
// with -benchtime 1x:
//
//	go test -run '^$' -bench Scale -benchtime 1x ./bench
func BenchmarkScaleMemory(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run("leases="+strconv.Itoa(n), func(b *testing.B) {
			c := scaleConfig{Backend: backendMemory, Leases: n, Peer: true}
			if n >= 100000 {
				c.TTL, c.RenewEvery, c.Duration = 30*time.Second, 10*time.Second, 12*time.Second
			}
			benchScale(b, c)
		})
	}
}

func BenchmarkScaleRedis(b *testing.B) {
	addr := benchRedis(b)
	for _, n := range []int{1000, 10000} {
		b.Run("leases="+strconv.Itoa(n), func(b *testing.B) {
			benchScale(b, scaleConfig{Backend: backendRedis, RedisAddr: addr, Leases: n, Peer: true})
		})
	}
}

func benchRedis(b *testing.B) string {
	return envOr("LEASEHOLD_REDIS_ADDR", "127.0.0.1:6379")
}

func benchScale(b *testing.B, c scaleConfig) {
	if c.TTL == 0 {
		c.TTL, c.RenewEvery, c.Duration = 3*time.Second, time.Second, 3*time.Second
	}
	for range b.N {
		rs, err := runScale(context.Background(), c, func(string) {})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			p := r.System + "-"
			b.ReportMetric(r.AcquireAllSec, p+"acquire-all-s")
			b.ReportMetric(r.CloseSec, p+"close-s")
			b.ReportMetric(r.RenewalsPerSec, p+"renewals/s")
			b.ReportMetric(r.RoundTripsPerSec, p+"round-trips/s")
			b.ReportMetric(r.CPUCores*100, p+"cpu-%")
			b.ReportMetric(r.HeapPerLease, p+"heap-B/lease")
			b.ReportMetric(r.SetupHeap, p+"setup-heap-B")
			b.ReportMetric(float64(r.Losses), p+"losses")
		}
	}
}
