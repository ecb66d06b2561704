package backend_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// recorder is a middleware that records the ops of every round trip.
type recorder struct {
	mu     sync.Mutex
	rounds [][]backend.Op
}

func (r *recorder) call(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
	ops := make([]backend.Op, len(calls))
	for i, c := range calls {
		ops[i] = c.Op
	}
	r.mu.Lock()
	r.rounds = append(r.rounds, ops)
	r.mu.Unlock()
	next(ctx, calls)
}

func (r *recorder) take() [][]backend.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rounds
	r.rounds = nil
	return out
}

// batching is a memory backend that also batches, one call after another,
// counting its batches.
type batching struct {
	*memory.Backend
	batches int
}

func (b *batching) Info() backend.Info {
	info := b.Backend.Info()
	info.Batches = true
	return info
}

func (b *batching) Batch(ctx context.Context, calls []backend.Call) {
	b.batches++
	for i := range calls {
		c := &calls[i]
		switch c.Op {
		case backend.OpAcquire:
			c.Grant, c.Err = b.Acquire(ctx, c.Acquire)
		case backend.OpRenew:
			c.Grant, c.Err = b.Renew(ctx, c.Renew)
		case backend.OpRelease:
			c.Err = b.Release(ctx, c.Release)
		}
	}
}

func acquireReq(key string) backend.AcquireRequest {
	return backend.AcquireRequest{Key: key, Owner: "o", Attempt: "a-" + key, TTL: time.Minute}
}

func renewReq(key string, tok uint64) backend.RenewRequest {
	return backend.RenewRequest{Key: key, Owner: "o", Attempt: "a-" + key, Token: tok, TTL: time.Minute}
}

// Every round trip of lease traffic goes through Middleware.Call once, batches
// as one round trip, and the answers come back through it.
func TestWrapSendsEveryRoundTripThroughCall(t *testing.T) {
	ctx := context.Background()
	inner := &batching{Backend: memory.New()}
	rec := &recorder{}
	b := backend.Wrap(inner, backend.Middleware{Call: rec.call})

	g1, err := b.Acquire(ctx, acquireReq("k1"))
	if err != nil || !g1.Acquired {
		t.Fatalf("acquire: %+v, %v", g1, err)
	}
	g2, _ := b.Acquire(ctx, acquireReq("k2"))
	if _, err := b.Renew(ctx, renewReq("k1", g1.Token)); err != nil {
		t.Fatal(err)
	}
	res, err := b.RenewBatch(ctx, []backend.RenewRequest{renewReq("k1", g1.Token), renewReq("k2", g2.Token)})
	if err != nil || len(res) != 2 || res[0].Err != nil || res[1].Grant.Token != g2.Token {
		t.Fatalf("renew batch: %+v, %v", res, err)
	}
	calls := []backend.Call{
		{Op: backend.OpRelease, Release: backend.ReleaseRequest{Key: "k1", Owner: "o", Attempt: "a-k1"}},
		{Op: backend.OpAcquire, Acquire: acquireReq("k3")},
	}
	b.Batch(ctx, calls)
	if calls[0].Err != nil || !calls[1].Grant.Acquired || inner.batches != 1 {
		t.Fatalf("batch: %+v, %d inner batches", calls, inner.batches)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k2", Owner: "o", Attempt: "a-k2"}); err != nil {
		t.Fatal(err)
	}
	want := [][]backend.Op{
		{backend.OpAcquire}, {backend.OpAcquire}, {backend.OpRenew},
		{backend.OpRenew, backend.OpRenew}, {backend.OpRelease, backend.OpAcquire}, {backend.OpRelease},
	}
	if got := rec.take(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("round trips %v, want %v", got, want)
	}
	if _, held, _ := b.Inspect(ctx, "k3"); !held {
		t.Error("Inspect does not see k3 through the wrapper")
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("Inspect went through Call: %v", got)
	}
}

// A middleware can answer for the store (fault injection): a failed renewal
// fails a batch as a whole, a renewal answered "not held" fails only itself.
func TestWrapMiddlewareAnswers(t *testing.T) {
	ctx := context.Background()
	down := errors.New("injected: link down")
	var answer error
	b := backend.Wrap(memory.New(), backend.Middleware{Call: func(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
		next(ctx, calls)
		for i := range calls {
			if calls[i].Op == backend.OpRenew && calls[i].Renew.Key == "k1" && answer != nil {
				calls[i].Grant, calls[i].Err = backend.Grant{}, answer
			}
		}
	}})
	g1, _ := b.Acquire(ctx, acquireReq("k1"))
	g2, _ := b.Acquire(ctx, acquireReq("k2"))
	reqs := []backend.RenewRequest{renewReq("k1", g1.Token), renewReq("k2", g2.Token)}

	answer = down
	if _, err := b.Renew(ctx, reqs[0]); !errors.Is(err, down) {
		t.Errorf("renew: %v, want the injected error", err)
	}
	if res, err := b.RenewBatch(ctx, reqs); !errors.Is(err, down) || res != nil {
		t.Errorf("renew batch with a failed call: %v, %v; want no results and the error", res, err)
	}
	answer = fmt.Errorf("injected: %w", backend.ErrNotHeld)
	res, err := b.RenewBatch(ctx, reqs)
	if err != nil || !errors.Is(res[0].Err, backend.ErrNotHeld) || res[1].Err != nil || !res[1].Grant.Acquired {
		t.Errorf("renew batch with one call not held: %+v, %v", res, err)
	}
}

// announcing is a store whose release watch announces two keys and ends.
type announcing struct{ *memory.Backend }

func (announcing) WatchReleases(ctx context.Context, fn func(string)) error {
	fn("a")
	fn("b")
	return nil
}

// Notify sees every announced release before the watcher does.
func TestWrapNotify(t *testing.T) {
	var seen []string
	b := backend.Wrap(announcing{memory.New()}, backend.Middleware{Notify: func(key string, next func(string)) {
		seen = append(seen, "notify "+key)
		next(key)
	}})
	err := b.WatchReleases(context.Background(), func(key string) { seen = append(seen, "deliver "+key) })
	want := []string{"notify a", "deliver a", "notify b", "deliver b"}
	if err != nil || !slices.Equal(seen, want) {
		t.Errorf("WatchReleases: %v, seen %v; want %v", err, seen, want)
	}
}

// Info passes through, except that Inline is dropped unless the middleware is
// declared non-blocking; wrapping twice changes nothing more.
func TestWrapInfo(t *testing.T) {
	inner := &batching{Backend: memory.New()}
	want := inner.Info()
	if !want.Inline || !want.Batches || !want.Queue || !want.AnnouncesReleases || !want.HandOffNotices {
		t.Fatalf("the inner backend's Info = %+v", want)
	}
	if got := backend.Wrap(backend.Wrap(inner, backend.Middleware{NonBlocking: true}), backend.Middleware{NonBlocking: true}).Info(); got != want {
		t.Errorf("Info through non-blocking middleware = %+v, want %+v", got, want)
	}
	want.Inline = false
	if got := backend.Wrap(inner, backend.Middleware{}).Info(); got != want {
		t.Errorf("Info = %+v, want %+v (no Inline by default)", got, want)
	}
	if got := backend.Wrap(backend.Wrap(inner, backend.Middleware{}), backend.Middleware{NonBlocking: true}).Info(); got != want {
		t.Errorf("Info through a blocking, then a non-blocking middleware = %+v, want %+v", got, want)
	}
}

// sharded is a memory backend whose shard is the key's first byte.
type sharded struct{ *memory.Backend }

func (sharded) Shard(key string) string { return key[:1] }

// A method the inner backend lacks (memory's Batch) answers
// errors.ErrUnsupported through the wrapper, through the middleware; Shard
// passes through.
func TestWrapUnsupported(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	b := backend.Wrap(backend.Wrap(memory.New(), backend.Middleware{}), backend.Middleware{Call: rec.call})
	calls := []backend.Call{{Op: backend.OpAcquire, Acquire: acquireReq("k")}}
	b.Batch(ctx, calls)
	if !errors.Is(calls[0].Err, errors.ErrUnsupported) {
		t.Errorf("Batch: %v, want ErrUnsupported", calls[0].Err)
	}
	if got := rec.take(); len(got) != 1 {
		t.Errorf("Batch made round trips %v through Call, want one", got)
	}
	if s := backend.Wrap(backend.Wrap(sharded{memory.New()}, backend.Middleware{}), backend.Middleware{}); s.Shard("abc") != "a" || s.Shard("xyz") != "x" {
		t.Error("Shard does not pass through two wrappers")
	}
	if s := backend.Wrap(memory.New(), backend.Middleware{}).Shard("abc"); s != "" {
		t.Errorf("Shard of a backend without shards = %q", s)
	}
}

// The wrapped memory backend, with a middleware that passes everything on,
// still passes the conformance suite.
func TestWrapConformance(t *testing.T) {
	newBackend := func(t *testing.T) backend.Backend {
		return backend.Wrap(memory.New(), backend.Middleware{
			Call: func(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
				next(ctx, calls)
			},
			Notify: func(key string, next func(string)) { next(key) },
		})
	}
	backendtest.Run(t, newBackend)
	leaseholdtest.Run(t, newBackend)
}
