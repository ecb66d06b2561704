package engine

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLocalDeadlineFallsBeforeBackendExpiry(t *testing.T) {
	sent := time.Now()
	for _, ttl := range []time.Duration{time.Millisecond, 100 * time.Millisecond, 30 * time.Second, time.Hour} {
		d := LocalDeadline(sent, ttl)
		if !d.Before(sent.Add(ttl)) || !d.After(sent) {
			t.Errorf("TTL %v: deadline %v after send, want within (0, TTL)", ttl, d.Sub(sent))
		}
		if m := ttl - d.Sub(sent); m > time.Second {
			t.Errorf("TTL %v: margin %v, want at most a second", ttl, m)
		}
	}
}

func TestPollDelay(t *testing.T) {
	for attempt := range 30 {
		d := PollDelay(attempt, false, 0, false, 0)
		if d <= 0 || d > pollCapPolling {
			t.Fatalf("attempt %d: %v", attempt, d)
		}
		if d := PollDelay(attempt, true, 0, false, 0); d > pollCapNotified {
			t.Fatalf("attempt %d notified: %v", attempt, d)
		}
	}
	// Never later than just after the holder's expiry.
	if d := PollDelay(30, true, 0, false, 10*time.Millisecond); d > 12*time.Millisecond {
		t.Errorf("holder expires in 10ms, poll in %v", d)
	}
	if d := PollDelay(0, false, 0, false, time.Nanosecond); d > 2*time.Millisecond {
		t.Errorf("holder about to expire: poll in %v, want about 1ms", d)
	}
	// Queued on the store: within the pickup window (a hand-off lasts that
	// long); with hand-off notices, no more often than about that either.
	const pickup = 100 * time.Millisecond
	for attempt := range 30 {
		if d := PollDelay(attempt, true, pickup, false, 0); d > pickup {
			t.Fatalf("queued, no notices, attempt %d: %v, want within the window", attempt, d)
		}
		if d := PollDelay(attempt, true, pickup, true, 0); d < pickup/2 || d > pickup {
			t.Fatalf("queued with notices, attempt %d: %v, want in [window/2, window]", attempt, d)
		}
	}
}

func TestSpreadAndRenewDelays(t *testing.T) {
	for range 1000 {
		if d := Spread(time.Second); d <= 900*time.Millisecond || d > time.Second {
			t.Fatalf("Spread(1s) = %v", d)
		}
	}
	if d := RenewDelay(10*time.Second, 30*time.Second, 15*time.Second); d != 5*time.Second {
		t.Errorf("renewDelay scaled = %v, want 5s", d)
	}
	// A Renew with a shorter TTL: the period scaled down with it (58s for
	// 60s, so 5.8s for 6s) would come after the local deadline (5.4s); it
	// is capped so that the renewal is confirmed in time (4.8s).
	if d, deadline := RenewDelay(58*time.Second, time.Minute, 6*time.Second), 6*time.Second-600*time.Millisecond; d > deadline-600*time.Millisecond {
		t.Errorf("renewDelay after Renew(6s) of a 60s lease renewed every 58s = %v, local deadline %v: want room for the round trip", d, deadline)
	}
	if d := RenewRetryDelay(0); d <= 0 {
		t.Errorf("RenewRetryDelay(0) = %v", d)
	}
}
