package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

type ctxKey struct{}

// An acquire whose caller's context never ends runs under a context that
// carries the caller's values and ends with base, and contexts derived from
// it join base's cancellation without a goroutine each.
func TestAcquireOfACallerThatNeverGivesUpEndsWithBase(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	caller := context.WithValue(context.Background(), ctxKey{}, "v")
	m := &messages.BackendCall{Call: backend.Call{Op: backend.OpAcquire}, Ctx: caller}
	ctx, done := callContext(base, false, m)
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
	m := &messages.BackendCall{Call: backend.Call{Op: backend.OpAcquire}, Ctx: caller}
	ctx, done := callContext(base, false, m)
	defer done()
	if got := ctx.Value(ctxKey{}); got != "v" {
		t.Fatalf("value %v, want the caller's", got)
	}
	cancel()
	<-ctx.Done()
}
