package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A holder whose process was paused past the local deadline learns of the
// loss from its own handle, before the lease actor's timer tick is handled.
func TestHoldingPastItsDeadlineIsLost(t *testing.T) {
	h := NewHolding("job", "job", "o1", "a1", "", 7, time.Now().Add(time.Minute), nil)
	h.SetDeadline(time.Now().Add(time.Hour))
	if err := h.Err(); err != nil {
		t.Fatalf("held: %v", err)
	}
	ctx := h.Context()
	h.SetDeadline(time.Now().Add(-time.Millisecond)) // as after a long pause
	if err := h.Err(); !errors.Is(err, ErrLost) || !errors.Is(err, ErrDeadlinePassed) {
		t.Fatalf("Err() = %v, want ErrLost (deadline passed)", err)
	}
	select {
	case <-h.Lost():
	default:
		t.Error("Lost() still open")
	}
	if !errors.Is(context.Cause(ctx), ErrLost) {
		t.Errorf("Context cause = %v", context.Cause(ctx))
	}
	if h.End(errors.New("later"), true) {
		t.Error("a second End counted")
	}
}

func TestReleasedHoldingIsNotLost(t *testing.T) {
	h := NewHolding("job", "job", "o1", "a1", "", 7, time.Now(), nil)
	h.SetDeadline(time.Now().Add(time.Hour))
	if !h.End(ErrReleased, false) {
		t.Fatal("End did not count")
	}
	h.SetDeadline(time.Now().Add(-time.Hour))
	if err := h.Err(); !errors.Is(err, ErrReleased) {
		t.Errorf("Err() = %v, want ErrReleased", err)
	}
	select {
	case <-h.Lost():
		t.Error("a released holding reported lost")
	default:
	}
	if !errors.Is(context.Cause(h.Context()), ErrReleased) {
		t.Error("Context not ended with ErrReleased")
	}
}

// The deadline check reads the clock the deadline was set on (the engine's),
// not the system's: a fake engine clock past the deadline is a loss, and
// the system's time is not consulted.
func TestHoldingReadsItsEnginesClock(t *testing.T) {
	now := time.Now()
	h := NewHolding("job", "job", "o1", "a1", "", 7, now, func() time.Time { return now })
	h.SetDeadline(now.Add(time.Hour))
	if err := h.Err(); err != nil {
		t.Fatalf("held: %v", err)
	}
	now = now.Add(2 * time.Hour) // the engine's clock moved on; the system's did not
	if err := h.Err(); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("Err() past the engine clock's deadline = %v, want ErrDeadlinePassed", err)
	}
}
