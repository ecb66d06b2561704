package roundtrip

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A call abandoned when its context ended holds back later calls on its
// names until it finishes (it may still reach the store, and must not be
// overtaken), and nothing else.
func TestAbandonedCallIsNotOvertaken(t *testing.T) {
	closing := make(chan struct{})
	t.Cleanup(func() { close(closing) })
	r := New(closing)

	started, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		first <- r.Do(ctx, []string{"k", "j"}, func(context.Context) {
			close(started)
			<-release // a reply that does not come
		})
	}()
	<-started
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned call: %v, want context.Canceled", err)
	}

	var ran atomic.Bool
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	if err := r.Do(short, []string{"k"}, func(context.Context) { ran.Store(true) }); !errors.Is(err, context.DeadlineExceeded) || ran.Load() {
		t.Fatalf("a call on the same name while the abandoned one runs: %v, ran %v; want it held back until its deadline", err, ran.Load())
	}
	if err := r.Do(ctxT(t), []string{"other"}, func(context.Context) { ran.Store(true) }); err != nil || !ran.Load() {
		t.Fatalf("a call on another name: %v, ran %v; want it run at once", err, ran.Load())
	}

	close(release)
	ran.Store(false)
	if err := r.Do(ctxT(t), []string{"j"}, func(context.Context) { ran.Store(true) }); err != nil || !ran.Load() {
		t.Fatalf("a call once the abandoned one finished: %v, ran %v", err, ran.Load())
	}
	if n := r.Abandoned(); n != 0 {
		t.Fatalf("%d names still recorded as abandoned", n)
	}
}

// A panic in a round trip is the caller's, as if fn had run on its
// goroutine.
func TestPanicReachesTheCaller(t *testing.T) {
	closing := make(chan struct{})
	t.Cleanup(func() { close(closing) })
	r := New(closing)
	defer func() {
		if got := recover(); got != "boom" {
			t.Fatalf("recovered %v, want the round trip's panic", got)
		}
	}()
	_ = r.Do(ctxT(t), nil, func(context.Context) { panic("boom") })
	t.Fatal("Do returned after its round trip panicked")
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
