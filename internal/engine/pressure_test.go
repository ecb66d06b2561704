package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/clock/clocktest"
	"github.com/leasehold/leasehold/internal/protocol"
)

// A renewal answered more than half its slack late holds acquires back until
// renewals are answered on time again, or the hold lapses; one answered on
// time holds nothing back. A renewal sent on time but answered late counts
// as late: the calls, not the timer, are what falls behind under load.
func TestPressureHoldsAcquiresWhileRenewalsGoLate(t *testing.T) {
	clock := clocktest.New()
	var sent []sentRenewal
	r := newRenewer(clock, 10, time.Millisecond, func(b []sentRenewal) { sent = b },
		func(*entry, *protocol.BackendResult) {}, nil)
	t.Cleanup(r.stop)
	t0 := clock.Now()
	// goAt sends n, due at `at`, on time; answerAt answers it at `at`.
	goAt := func(n *renewal, at time.Time) {
		t.Helper()
		r.schedule(n, at, 0)
		clock.Set(at)
		sent = nil
		r.fire()
		if len(sent) != 1 {
			t.Fatalf("renewal %d not sent when due", n.Call.Seq)
		}
	}
	answerAt := func(at time.Time) {
		clock.Set(at)
		r.answer(sent, make([]backend.RenewResult, len(sent)), nil)
	}

	onTime := newRenewal(1)
	onTime.Call.Deadline = t0.Add(3 * time.Second) // slack 2s from its due time
	goAt(onTime, t0.Add(time.Second))
	answerAt(t0.Add(1900 * time.Millisecond)) // 0.9s late: within half its slack
	if r.pressure.behind(clock) {
		t.Fatal("a renewal within half its slack holds acquires back")
	}
	if err := r.pressure.admit(context.Background(), clock); err != nil {
		t.Fatalf("admit = %v", err)
	}

	late := newRenewal(2)
	late.Call.Deadline = t0.Add(4 * time.Second) // slack 2s from its due time
	goAt(late, t0.Add(2*time.Second))
	answerAt(t0.Add(3100 * time.Millisecond)) // sent on time, answered 1.1s late
	if !r.pressure.behind(clock) {
		t.Fatal("a renewal answered more than half its slack late holds nothing back")
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

	// Answers that all come on time lift the hold at once.
	again, prompt := newRenewal(3), newRenewal(4)
	again.Call.Deadline = clock.Now().Add(time.Second)
	goAt(again, clock.Now())
	answerAt(clock.Now().Add(900 * time.Millisecond))
	if !r.pressure.behind(clock) {
		t.Fatal("late again, but nothing held back")
	}
	prompt.Call.Deadline = clock.Now().Add(2 * time.Second)
	goAt(prompt, clock.Now().Add(time.Millisecond))
	answerAt(clock.Now().Add(time.Millisecond))
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
