package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// CtxSlack is how long after its context ends a call may take to return in
// the rows "every call ends with its context": small, far below any client's
// read timeout (seconds) or TCP's own, with room for a loaded machine under
// -race.
const CtxSlack = time.Second

// ctxEndsAfter is when the rows end the context of each call: long enough
// for the call to be on the wire.
const ctxEndsAfter = 200 * time.Millisecond

// EndsWithContext runs call with a context that ends after 200 ms, cancelled
// or at its deadline, and checks that call returns within CtxSlack of that
// with an error wrapping the context's (context.Canceled or
// context.DeadlineExceeded). It fails, rather than hangs, when call does not
// return; call then runs on until whatever blocks it lets go.
func EndsWithContext(t *testing.T, cancelled bool, call func(ctx context.Context) error) {
	t.Helper()
	var (
		ctx    context.Context
		cancel context.CancelFunc
		want   = context.DeadlineExceeded
	)
	if cancelled {
		ctx, cancel = context.WithCancel(context.Background())
		timer := time.AfterFunc(ctxEndsAfter, cancel)
		defer timer.Stop()
		want = context.Canceled
	} else {
		ctx, cancel = context.WithTimeout(context.Background(), ctxEndsAfter)
	}
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	select {
	case err := <-done:
		if el := time.Since(start); el > ctxEndsAfter+CtxSlack {
			t.Errorf("returned %v after the call began; its context ended at %v", el, ctxEndsAfter)
		}
		if !errors.Is(err, want) {
			t.Errorf("err = %v, want the context's %v", err, want)
		}
	case <-time.After(ctxEndsAfter + 5*CtxSlack):
		t.Errorf("still running %v after its context ended", 5*CtxSlack)
	}
}

// bBlackholed: with the link to the store black-holed (nothing answers,
// nothing is refused, connections stay open), every call returns within its
// context plus CtxSlack with the context's error, cancelled or at its
// deadline: Acquire, Renew, Release, and Inspect, List, Revoke, RenewBatch
// and Batch where Info declares it. Close, which has no context, returns
// within CtxSlack.
func (s *suite) bBlackholed(t *testing.T) {
	if s.blackhole == nil {
		t.Skip("this backend's test supplies no link to black-hole (Options.Blackhole)")
	}
	b, blackhole := s.blackhole(t)
	k := uniq(t)
	// Granted before the hole: a holding for Renew and Release to name, and
	// the connections and anything else the backend prepares are in place.
	h := mustGrant(t, b, k+"held", "o1", time.Minute)
	blackhole()

	type call struct {
		name string
		fn   func(ctx context.Context) error
	}
	calls := []call{
		{"Acquire", func(ctx context.Context) error {
			_, err := b.Acquire(ctx, backend.AcquireRequest{Key: k + "free", Owner: "o2", Attempt: newAttempt(), TTL: time.Minute})
			return err
		}},
		{"Renew", func(ctx context.Context) error { _, err := b.Renew(ctx, h.renewReq(time.Minute)); return err }},
		{"Release", func(ctx context.Context) error { return b.Release(ctx, h.releaseReq()) }},
		{"Inspect", func(ctx context.Context) error { _, _, err := b.Inspect(ctx, k+"held"); return err }},
		{"List", func(ctx context.Context) error {
			return b.List(ctx, k, func(backend.Holder) bool { return true })
		}},
		{"Revoke", func(ctx context.Context) error { _, _, err := b.Revoke(ctx, k+"held", h.Token); return err }},
		{"RenewBatch", func(ctx context.Context) error {
			_, err := b.RenewBatch(ctx, []backend.RenewRequest{h.renewReq(time.Minute), h.renewReq(time.Minute)})
			return err
		}},
	}
	if b.Info().Batches {
		calls = append(calls, call{"Batch", func(ctx context.Context) error {
			cs := []backend.Call{
				{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: k + "free", Owner: "o2", Attempt: newAttempt(), TTL: time.Minute}},
				{Op: backend.OpRenew, Renew: h.renewReq(time.Minute)},
			}
			b.Batch(ctx, cs)
			for _, c := range cs { // each call answers with the context's error
				if !errors.Is(c.Err, context.Canceled) && !errors.Is(c.Err, context.DeadlineExceeded) {
					return c.Err
				}
			}
			return cs[0].Err
		}})
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			t.Run("Cancelled", func(t *testing.T) { EndsWithContext(t, true, c.fn) })
			t.Run("Deadline", func(t *testing.T) { EndsWithContext(t, false, c.fn) })
		})
	}
	t.Run("Close", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- b.Close() }()
		select {
		case <-done:
		case <-time.After(CtxSlack):
			t.Errorf("Close did not return within %v", CtxSlack)
		}
	})
}
