package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/protocol"
)

type ctxKey struct{}

// An acquire whose caller's context never ends runs under a context that
// carries the caller's values and ends with base, and contexts derived from
// it join base's cancellation without a goroutine each.
func TestAcquireOfACallerThatNeverGivesUpEndsWithBase(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	caller := context.WithValue(context.Background(), ctxKey{}, "v")
	m := &protocol.BackendCall{Call: backend.Call{Op: backend.OpAcquire}, Ctx: caller}
	ctx, done := callContext(&Config{}, base, false, m, time.Now())
	defer done()
	if got := ctx.Value(ctxKey{}); got != "v" {
		t.Fatalf("value %v, want the caller's", got)
	}
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a deadline the caller did not set")
	}
	before := runtime.NumGoroutine()
	const children = 100
	kids := make([]context.Context, children)
	for i := range kids {
		var stop context.CancelFunc
		kids[i], stop = context.WithCancel(ctx)
		defer stop()
	}
	fired := make(chan struct{})
	context.AfterFunc(ctx, func() { close(fired) })
	if n := runtime.NumGoroutine() - before; n > children/2 {
		t.Fatalf("%d goroutines for %d derived contexts", n, children)
	}
	if ctx.Err() != nil {
		t.Fatalf("ended before base: %v", ctx.Err())
	}
	cancel()
	<-ctx.Done()
	<-fired
	for _, k := range kids {
		<-k.Done()
	}
	if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("err %v, cause %v; want base's", ctx.Err(), context.Cause(ctx))
	}
}

// An acquire whose caller can give up ends with the caller too.
func TestAcquireEndsWithItsCaller(t *testing.T) {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	caller, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	m := &protocol.BackendCall{Call: backend.Call{Op: backend.OpAcquire}, Ctx: caller}
	ctx, done := callContext(&Config{}, base, false, m, time.Now())
	defer done()
	if got := ctx.Value(ctxKey{}); got != "v" {
		t.Fatalf("value %v, want the caller's", got)
	}
	cancel()
	<-ctx.Done()
}

// Releases that start close together share their bounding context; each is
// bounded by releaseTimeout at least and releaseShare more at most, and by
// base.
func TestReleasesShareTheirBound(t *testing.T) {
	cfg := &Config{}
	base, cancel := context.WithCancel(context.Background())
	rel := &protocol.BackendCall{Call: backend.Call{Op: backend.OpRelease}}
	t0 := time.Now()
	first, _ := callContext(cfg, base, false, rel, t0)
	d, ok := first.Deadline()
	if !ok || d.Before(t0.Add(releaseTimeout)) || d.After(t0.Add(releaseTimeout+releaseShare)) {
		t.Fatalf("deadline %v after start, want %v to %v", d.Sub(t0), releaseTimeout, releaseTimeout+releaseShare)
	}
	if same, _ := callContext(cfg, base, false, rel, t0.Add(releaseShare/2)); same != first {
		t.Fatal("a release soon after got a context of its own")
	}
	later := t0.Add(releaseShare + time.Millisecond)
	next, _ := callContext(cfg, base, false, rel, later)
	if next == first {
		t.Fatal("a release after releaseShare got a bound shorter than releaseTimeout")
	}
	if d, _ := next.Deadline(); d.Before(later.Add(releaseTimeout)) {
		t.Fatalf("deadline %v after start, want at least %v", d.Sub(later), releaseTimeout)
	}
	other, stop := context.WithCancel(context.Background())
	defer stop()
	if o, _ := callContext(cfg, other, false, rel, later); o == next {
		t.Fatal("a release under another base got the first base's context")
	}
	cancel()
	<-first.Done()
	<-next.Done()
	if !errors.Is(next.Err(), context.Canceled) {
		t.Fatalf("after base ended: %v", next.Err())
	}
}
