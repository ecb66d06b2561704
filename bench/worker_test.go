package main

import (
	"context"
	"testing"
	"time"
)

// passedDeadline is a context whose deadline has passed while its Err does
// not say so yet: the moment between the deadline and its timer.
type passedDeadline struct{ context.Context }

func (passedDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A store call that ends at the run's deadline may return before the
// context says it has ended; its error is the run's end, not a failure.
func TestRunEndedAtItsDeadlineBeforeErrSaysSo(t *testing.T) {
	if !runEnded(passedDeadline{context.Background()}) {
		t.Error("a context past its deadline counts as running")
	}
	if runEnded(context.Background()) {
		t.Error("a context without a deadline counts as ended")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if runEnded(ctx) {
		t.Error("a context before its deadline counts as ended")
	}
	cancel()
	if !runEnded(ctx) {
		t.Error("a cancelled context counts as running")
	}
}
