package roundtrip

import (
	"context"
	"errors"
	"strconv"
	"sync"
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

// Calls that finish, calls abandoned and calls that finish as their context
// ends, many at once: each call sees only its own round trip's work, a call
// that returned nil saw its fn run, and nothing stays abandoned (Do reuses
// the trips it saw finish).
func TestTripsAreReusedWithoutCrossTalk(t *testing.T) {
	closing := make(chan struct{})
	t.Cleanup(func() { close(closing) })
	r := New(closing)
	const goroutines, calls = 8, 300
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			names := []string{strconv.Itoa(g)}
			for i := range calls {
				ctx, cancel := context.WithCancel(context.Background())
				var got atomic.Int64
				want := int64(g*calls + i + 1)
				block := make(chan struct{})
				err := r.Do(ctx, names, func(context.Context) {
					switch i % 3 {
					case 1: // ends as its context does
						cancel()
					case 2: // outlives its context
						cancel()
						<-block
					}
					got.Store(want)
				})
				close(block)
				cancel()
				if err == nil && got.Load() != want {
					t.Errorf("call %d/%d returned nil with %d written, want %d", g, i, got.Load(), want)
				}
				if i%3 == 2 && err == nil {
					t.Errorf("call %d/%d outlived its context and returned nil", g, i)
				}
			}
		})
	}
	wg.Wait()
	// The abandoned trips finish once unblocked; a call on each name waits
	// for them.
	for g := range goroutines {
		if err := r.Do(ctxT(t), []string{strconv.Itoa(g)}, func(context.Context) {}); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.Abandoned(); n != 0 {
		t.Fatalf("%d names still recorded as abandoned", n)
	}
}
