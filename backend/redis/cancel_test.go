package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
	"github.com/leasehold/leasehold/election"
)

// ctxSlack is how long after its context ends a call may take to return
// (the conformance suites' bound).
const ctxSlack = backendtest.CtxSlack

// Every call ends when its context does, with the context's error, while the
// link is black-holed: cancelled or past its deadline, and on a client that
// lets neither reach the socket (no ContextTimeoutEnabled, no ReadTimeout).
// go-redis bounds a read only with a deadline, and only with that option, so
// a call used to wait for ReadTimeout (5 s here, `i/o timeout`), or for ever.
// Once the link is back, the client works again: the connections the
// abandoned calls held are not reused.
func TestCallsEndWithTheirContext(t *testing.T) {
	redistest.Client(t)
	clients := []struct {
		name string
		opt  goredis.Options
	}{
		{"ContextTimeoutEnabled", goredis.Options{ContextTimeoutEnabled: true, MaxRetries: -1, ReadTimeout: 5 * time.Second}},
		{"NoTimeouts", goredis.Options{MaxRetries: -1, ReadTimeout: -1, WriteTimeout: -1}},
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			p := redistest.NewProxy(t, redistest.Addr())
			opt := cl.opt
			opt.Addr = p.Addr()
			c := goredis.NewClient(&opt)
			t.Cleanup(func() { _ = c.Close() })
			b := newTestBackend(t, c)
			t.Cleanup(func() { p.Blackhole(false) })             // before the backend's own clean-up
			g := mustAcquire(t, b, "held", "alice", time.Minute) // loads the scripts too
			acquire := backend.AcquireRequest{Key: "k", Owner: "bob", Attempt: newAttempt(), TTL: time.Minute}

			calls := []struct {
				name string
				call func(ctx context.Context) error
			}{
				{"Acquire", func(ctx context.Context) error { _, err := b.Acquire(ctx, acquire); return err }},
				{"Renew", func(ctx context.Context) error { _, err := b.Renew(ctx, g.renew(time.Minute)); return err }},
				{"Release", func(ctx context.Context) error { return b.Release(ctx, g.release()) }},
				{"Inspect", func(ctx context.Context) error { _, _, err := b.Inspect(ctx, "held"); return err }},
				{"List", func(ctx context.Context) error {
					return b.List(ctx, "", func(backend.Holder) bool { return true })
				}},
				{"Revoke", func(ctx context.Context) error { _, _, err := b.Revoke(ctx, "held", g.Token); return err }},
				{"RenewBatch", func(ctx context.Context) error {
					_, err := b.RenewBatch(ctx, []backend.RenewRequest{g.renew(time.Minute), g.renew(time.Minute)})
					return err
				}},
				{"Batch", func(ctx context.Context) error {
					calls := []backend.Call{acquireOp("k", "bob", newAttempt(), false), renewOp(g.renew(time.Minute))}
					b.Batch(ctx, calls)
					for _, c := range calls { // every call gets the context's error
						if !errors.Is(c.Err, context.Canceled) && !errors.Is(c.Err, context.DeadlineExceeded) {
							return c.Err
						}
					}
					return calls[0].Err
				}},
				{"NewContext", func(ctx context.Context) error { _, err := NewContext(ctx, c); return err }},
			}
			p.Blackhole(true)
			for _, cc := range calls {
				t.Run(cc.name, func(t *testing.T) {
					t.Run("Cancelled", func(t *testing.T) { backendtest.EndsWithContext(t, true, cc.call) })
					t.Run("Deadline", func(t *testing.T) { backendtest.EndsWithContext(t, false, cc.call) })
				})
			}
			p.Blackhole(false)
			if _, err := b.Renew(ctxT(t), g.renew(time.Minute)); err != nil {
				t.Fatalf("renew once the link is back: %v", err)
			}
		})
	}
}

// watchCalls wraps b so that every round trip reports its op on the channel
// returned as it begins (dropped when the channel is full).
func watchCalls(b backend.Backend) (backend.Backend, <-chan backend.Op) {
	ops := make(chan backend.Op, 256)
	return backend.Wrap(b, backend.Middleware{Call: func(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
		for _, c := range calls {
			select {
			case ops <- c.Op:
			default:
			}
		}
		next(ctx, calls)
	}}), ops
}

// awaitOp waits for a round trip of op to begin.
func awaitOp(t *testing.T, ops <-chan backend.Op, op backend.Op) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-ops:
			if got == op {
				return
			}
		case <-deadline:
			t.Fatalf("no %v call began", op)
		}
	}
}

// Manager.Close with a 300 ms context returns by then (plus ctxSlack) while
// the link is black-holed with an acquire, or a renewal, on the wire: it
// cancels the calls in flight, and a cancelled Redis call returns at once.
// It used to wait for the socket's ReadTimeout (5 s).
func TestManagerCloseEndsWithItsContextWhileBlackHoled(t *testing.T) {
	redistest.Client(t)
	for _, op := range []backend.Op{backend.OpAcquire, backend.OpRenew} {
		t.Run(op.String(), func(t *testing.T) {
			p := redistest.NewProxy(t, redistest.Addr())
			b, ops := watchCalls(newTestBackend(t, redistest.NewClient(t, p.Addr())))
			t.Cleanup(func() { p.Blackhole(false) }) // before the backend's own clean-up
			m, err := leasehold.New(b, leasehold.WithOwner("alice"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close(context.Background()) })
			acquired := make(chan error, 1)
			if op == backend.OpAcquire {
				p.Blackhole(true)
				go func() {
					_, err := m.Acquire(context.Background(), "job")
					acquired <- err
				}()
			} else {
				if _, err := m.Acquire(ctxT(t), "job", leasehold.WithTTL(3*time.Second), leasehold.WithRenewEvery(50*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
				p.Blackhole(true)
				for len(ops) > 0 { // a renewal that began before the hole may have been answered
					<-ops
				}
			}
			awaitOp(t, ops, op)

			const within = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			start := time.Now()
			_ = m.Close(ctx)
			if el := time.Since(start); el > within+ctxSlack {
				t.Errorf("Close took %v with a %v context while a %v was on a black-holed link", el, within, op)
			}
			if op == backend.OpAcquire {
				select {
				case err := <-acquired:
					if !errors.Is(err, leasehold.ErrClosed) {
						t.Errorf("the acquire in flight got %v, want ErrClosed", err)
					}
				case <-time.After(ctxSlack):
					t.Error("the acquire in flight was not answered once Close returned")
				}
			}
		})
	}
}

// Manager.Inspect, and election.Leader through it, end when their context is
// cancelled, with its error: they used to return `i/o timeout` after the
// client's 5 s ReadTimeout.
func TestManagerInspectEndsWithItsContext(t *testing.T) {
	redistest.Client(t)
	p := redistest.NewProxy(t, redistest.Addr())
	m := newManager(t, newTestBackend(t, redistest.NewClient(t, p.Addr())), "alice")
	t.Cleanup(func() { p.Blackhole(false) }) // before the Manager's and the backend's clean-up
	if _, err := m.Acquire(ctxT(t), "job"); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	t.Run("Inspect", func(t *testing.T) {
		backendtest.EndsWithContext(t, true, func(ctx context.Context) error { _, _, err := m.Inspect(ctx, "job"); return err })
	})
	t.Run("election.Leader", func(t *testing.T) {
		backendtest.EndsWithContext(t, true, func(ctx context.Context) error { _, _, err := election.Leader(ctx, m, "job"); return err })
	})
}
