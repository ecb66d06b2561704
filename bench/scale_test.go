package main

import (
	"context"
	"testing"
	"time"
)

// The scale tests' leases: a TTL with room for a loaded machine under the
// race detector (a renewal may be 1.7 s late before its lease is lost), kept
// for more than two renewal periods.
const (
	scaleTestTTL  = 3 * time.Second
	scaleTestHold = 2500 * time.Millisecond
)

// TestScaleMemory: a thousand leases kept alive on the memory backend, none
// lost, each renewed about once per period.
func TestScaleMemory(t *testing.T) {
	rs, err := runScale(context.Background(), scaleConfig{
		Backend: backendMemory, Leases: 1000, TTL: scaleTestTTL, RenewEvery: scaleTestTTL / 3,
		Duration: scaleTestHold,
	}, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	t.Logf("%+v", r)
	if r.Losses != 0 {
		t.Errorf("%d leases lost on a healthy backend", r.Losses)
	}
	// 1000 leases every second (spread down by up to a tenth): ~1050/s.
	if r.RenewalsPerSec < 600 || r.RenewalsPerSec > 1600 {
		t.Errorf("%.0f renewals/s, want about 1050", r.RenewalsPerSec)
	}
}

// TestScaleRedisBatches: on Redis the renewals of many leases share round
// trips, and the redislock peer needs one round trip per refresh.
func TestScaleRedisBatches(t *testing.T) {
	addr := testRedisAddr(t)
	rs, err := runScale(context.Background(), scaleConfig{
		Backend: backendRedis, RedisAddr: addr, Leases: 1000, TTL: scaleTestTTL,
		RenewEvery: scaleTestTTL / 3, Duration: scaleTestHold, Peer: true,
	}, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	lh, peer := rs[0], rs[1]
	t.Logf("leasehold %+v", lh)
	t.Logf("redislock %+v", peer)
	if lh.Losses != 0 {
		t.Errorf("leasehold lost %d leases", lh.Losses)
	}
	if lh.RoundTripsPerSec*10 > lh.RenewalsPerSec {
		t.Errorf("%.0f round trips/s for %.0f renewals/s: renewals are not batched", lh.RoundTripsPerSec, lh.RenewalsPerSec)
	}
	if peer.RoundTripsPerSec < peer.RenewalsPerSec {
		t.Errorf("redislock: %.0f round trips/s for %.0f refreshes/s", peer.RoundTripsPerSec, peer.RenewalsPerSec)
	}
}
