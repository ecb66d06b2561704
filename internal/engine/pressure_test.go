package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/clock/clocktest"
)

// A renewal sent more than half its slack late holds acquires back until
// renewals go out on time again, or the hold lapses; one sent on time holds
// nothing back.
func TestPressureHoldsAcquiresWhileRenewalsGoLate(t *testing.T) {
	clock := clocktest.New()
	r := newRenewer(clock, 10, time.Millisecond, func([]sentRenewal) {}, nil, nil)
	t.Cleanup(r.stop)
	t0 := clock.Now()

	onTime := newRenewal(1)
	onTime.Call.Deadline = t0.Add(3 * time.Second) // slack 2s from its due time
	r.schedule(onTime, t0.Add(time.Second), 0)
	clock.Set(t0.Add(1900 * time.Millisecond)) // 0.9s late: within half its slack
	r.fire()
	if r.pressure.behind(clock) {
		t.Fatal("a renewal within half its slack holds acquires back")
	}
	if err := r.pressure.admit(context.Background(), clock); err != nil {
		t.Fatalf("admit = %v", err)
	}

	late := newRenewal(2)
	late.Call.Deadline = t0.Add(4 * time.Second) // slack 2s from its due time
	r.schedule(late, t0.Add(2*time.Second), 0)
	clock.Set(t0.Add(3100 * time.Millisecond)) // 1.1s late
	r.fire()
	if !r.pressure.behind(clock) {
		t.Fatal("a renewal more than half its slack late holds nothing back")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.pressure.admit(ctx, clock); !errors.Is(err, context.Canceled) {
		t.Errorf("admit with an ended ctx while behind = %v, want context.Canceled", err)
	}
	admitted := make(chan error, 1)
	go func() { admitted <- r.pressure.admit(context.Background(), clock) }()
	waitForAfterFunc(t, clock)
	select {
	case err := <-admitted:
		t.Fatalf("admitted (%v) while renewals go late", err)
	default:
	}
	clock.Advance(pressureHold) // no renewal goes late meanwhile: the hold lapses
	select {
	case err := <-admitted:
		if err != nil {
			t.Errorf("admit = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still held back after the hold lapsed")
	}

	// A firing that sends every renewal on time lifts the hold at once.
	again, prompt := newRenewal(3), newRenewal(4)
	again.Call.Deadline = clock.Now().Add(time.Second)
	r.schedule(again, clock.Now(), 0)
	clock.Set(clock.Now().Add(900 * time.Millisecond))
	r.fire()
	if !r.pressure.behind(clock) {
		t.Fatal("late again, but nothing held back")
	}
	prompt.Call.Deadline = clock.Now().Add(2 * time.Second)
	r.schedule(prompt, clock.Now().Add(time.Millisecond), 0)
	clock.Set(clock.Now().Add(time.Millisecond))
	r.fire()
	if r.pressure.behind(clock) {
		t.Error("renewals on time again, but acquires still held back")
	}
}

// waitForAfterFunc waits until something waits on clock's AfterFunc.
func waitForAfterFunc(t *testing.T, clock *clocktest.Fake) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if clock.Waiting() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing waits on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}
