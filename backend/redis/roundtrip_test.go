package redis

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A call abandoned when its context ended holds back later calls on its
// names until it finishes (it may still reach the server, and must not be
// overtaken), and nothing else.
func TestAbandonedCallIsNotOvertaken(t *testing.T) {
	closing := make(chan struct{})
	t.Cleanup(func() { close(closing) })
	b := &Backend{io: newIOPool(closing)}

	started, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		first <- b.roundTrip(ctx, []string{"k", "j"}, func(context.Context) {
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
	if err := b.roundTrip(short, []string{"k"}, func(context.Context) { ran.Store(true) }); !errors.Is(err, context.DeadlineExceeded) || ran.Load() {
		t.Fatalf("a call on the same name while the abandoned one runs: %v, ran %v; want it held back until its deadline", err, ran.Load())
	}
	if err := b.roundTrip(ctxT(t), []string{"other"}, func(context.Context) { ran.Store(true) }); err != nil || !ran.Load() {
		t.Fatalf("a call on another name: %v, ran %v; want it run at once", err, ran.Load())
	}

	close(release)
	ran.Store(false)
	if err := b.roundTrip(ctxT(t), []string{"j"}, func(context.Context) { ran.Store(true) }); err != nil || !ran.Load() {
		t.Fatalf("a call once the abandoned one finished: %v, ran %v", err, ran.Load())
	}
	if n := b.abandoned.n.Load(); n != 0 {
		t.Fatalf("%d names still recorded as abandoned", n)
	}
}
