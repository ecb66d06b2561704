package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

func acquireOp(key, owner, attempt string, wait bool) backend.Call {
	return backend.Call{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{
		Key: key, Owner: owner, Attempt: attempt, TTL: time.Minute, Metadata: "m-" + owner, Wait: wait}}
}

func renewOp(r backend.RenewRequest) backend.Call {
	return backend.Call{Op: backend.OpRenew, Renew: r}
}

func releaseOp(r backend.ReleaseRequest) backend.Call {
	return backend.Call{Op: backend.OpRelease, Release: r}
}

// mustHolder checks who holds key now (owner "" for nobody).
func mustHolder(t *testing.T, b *Backend, key, owner string) backend.Holder {
	t.Helper()
	h, held, err := b.Inspect(ctxT(t), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	if held != (owner != "") || h.Owner != owner {
		t.Fatalf("Inspect(%q) = %+v, held %v; want holder %q", key, h, held, owner)
	}
	return h
}

// A batch mixing the three calls on several names, two pairs of them on one
// name, and invalid requests: each call is answered as its single call
// would be, and calls on one name run in their order.
func TestBatchMixed(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	held := mustAcquire(t, b, "held", "alice", time.Minute)
	bobs := mustAcquire(t, b, "bob's {x}", "bob", time.Minute)
	renewed := mustAcquire(t, b, "renewed", "alice", 10*time.Second)
	stale := renewed.renew(time.Minute)
	stale.Token++
	pair := newAttempt()

	calls := []backend.Call{
		0:  acquireOp("fresh", "alice", newAttempt(), false),
		1:  acquireOp("bob's {x}", "alice", newAttempt(), true), // refused; she waits
		2:  renewOp(renewed.renew(time.Minute)),
		3:  releaseOp(held.release()),                       // then, on the same name,
		4:  acquireOp("held", "carol", newAttempt(), false), // a grant to carol
		5:  acquireOp("", "alice", newAttempt(), false),     // invalid: no key
		6:  renewOp(stale),                                  // another token
		7:  releaseOp(backend.ReleaseRequest{Key: "bob's {x}", Owner: "alice", Attempt: bobs.attempt, Token: bobs.Token}),
		8:  {Op: backend.Op(99)},                                                                                          // unknown
		9:  renewOp(backend.RenewRequest{Key: "renewed", Owner: "alice", Attempt: renewed.attempt, Token: renewed.Token}), // invalid: no TTL
		10: acquireOp("pair", "dave", pair, false),                                                                        // granted, and then
		11: releaseOp(backend.ReleaseRequest{Key: "pair", Owner: "dave", Attempt: pair}),                                  // released by its attempt
	}
	// Answers left over from an earlier use of the slice are overwritten.
	calls[5].Err, calls[6].Grant = errors.New("stale"), backend.Grant{Acquired: true}
	b.Batch(ctx, calls)

	for _, i := range []int{0, 4, 10} {
		if g := calls[i].Grant; calls[i].Err != nil || !g.Acquired || g.Token == 0 || g.ExpiresAt.IsZero() {
			t.Errorf("call %d (%v %q): %+v, %v; want a grant", i, calls[i].Op, calls[i].Acquire.Key, g, calls[i].Err)
		}
	}
	if calls[4].Grant.Token <= held.Token {
		t.Errorf("carol's token %d does not outbid alice's %d", calls[4].Grant.Token, held.Token)
	}
	if g := calls[1].Grant; calls[1].Err != nil || g.Acquired || g.Holder != "bob" || g.HolderToken != bobs.Token || g.HolderExpiresIn <= 0 {
		t.Errorf("refused acquire: %+v, %v", g, calls[1].Err)
	}
	if g := calls[2].Grant; calls[2].Err != nil || !g.Acquired || g.Token != renewed.Token {
		t.Errorf("renewal: %+v, %v", g, calls[2].Err)
	}
	for _, i := range []int{3, 7, 11} {
		if calls[i].Err != nil {
			t.Errorf("release %d: %v", i, calls[i].Err)
		}
	}
	for _, i := range []int{5, 8, 9} {
		if !errors.Is(calls[i].Err, backend.ErrInvalidRequest) || calls[i].Grant != (backend.Grant{}) {
			t.Errorf("call %d: %+v, %v; want ErrInvalidRequest", i, calls[i].Grant, calls[i].Err)
		}
	}
	if !isNotHeld(calls[6].Err) || calls[6].Grant.Acquired {
		t.Errorf("stale renewal: %+v, %v; want ErrNotHeld", calls[6].Grant, calls[6].Err)
	}

	mustHolder(t, b, "fresh", "alice")
	if h := mustHolder(t, b, "held", "carol"); h.Token != calls[4].Grant.Token || h.Metadata != "m-carol" {
		t.Errorf("carol's holding: %+v", h)
	}
	mustHolder(t, b, "bob's {x}", "bob")
	mustHolder(t, b, "pair", "")
	if left := holdingTTL(t, c, b, "renewed"); left < 30*time.Second {
		t.Errorf("renewal not applied: %v left", left)
	}
	// The refused waiter marked bob's holding; the others stay unmarked.
	if w := c.HGet(ctx, b.LeaseKey("bob's {x}"), "w").Val(); w != "1" {
		t.Errorf("bob's holding not marked for its waiter: w = %q", w)
	}
	if c.HGet(ctx, b.LeaseKey("held"), "w").Val() == "1" {
		t.Error("carol's holding marked, nobody waits for it")
	}

	b.Batch(ctx, nil) // nothing to do, nothing sent
}

// The single calls and a batch answer the same requests alike, errors
// included (compared by kind and text).
func TestBatchAnswersAsSingleCalls(t *testing.T) {
	c := redistest.Client(t)
	single, batched := newTestBackend(t, c), newTestBackend(t, c)
	for _, b := range []*Backend{single, batched} {
		mustAcquireAs(t, b, "busy", "bob", "bob-1", time.Minute)
		mustAcquireAs(t, b, "mine", "alice", "alice-1", time.Minute)
	}
	calls := func() []backend.Call {
		return []backend.Call{
			acquireOp("busy", "alice", "alice-2", false),
			acquireOp("mine", "alice", "alice-1", false), // the same attempt again
			renewOp(backend.RenewRequest{Key: "busy", Owner: "alice", Attempt: "alice-2", Token: 5, TTL: time.Minute}),
			renewOp(backend.RenewRequest{Key: "free", Owner: "alice", Attempt: "alice-2", Token: 5, TTL: time.Minute}),
			releaseOp(backend.ReleaseRequest{Key: "busy", Owner: "alice", Attempt: "alice-2"}),
			acquireOp("x", "alice", "", false), // invalid attempt
		}
	}
	want := calls()
	ctx := ctxT(t)
	for i := range want {
		switch r := &want[i]; r.Op {
		case backend.OpAcquire:
			r.Grant, r.Err = single.Acquire(ctx, r.Acquire)
		case backend.OpRenew:
			r.Grant, r.Err = single.Renew(ctx, r.Renew)
		case backend.OpRelease:
			r.Err = single.Release(ctx, r.Release)
		}
	}
	got := calls()
	batched.Batch(ctx, got)
	for i := range want {
		w, g := want[i], got[i]
		// Times differ between the two runs; their presence must not.
		if w.Grant.Acquired != g.Grant.Acquired || w.Grant.Holder != g.Grant.Holder ||
			(w.Grant.Token == 0) != (g.Grant.Token == 0) || (w.Grant.HolderToken == 0) != (g.Grant.HolderToken == 0) ||
			w.Grant.ExpiresAt.IsZero() != g.Grant.ExpiresAt.IsZero() || (w.Grant.HolderExpiresIn > 0) != (g.Grant.HolderExpiresIn > 0) {
			t.Errorf("call %d: single %+v, batch %+v", i, w.Grant, g.Grant)
		}
		if (w.Err == nil) != (g.Err == nil) || (w.Err != nil && w.Err.Error() != g.Err.Error()) {
			t.Errorf("call %d: single error %v, batch error %v", i, w.Err, g.Err)
		}
	}
}

// A round trip that fails reaches every call it carried; invalid requests
// still get their own answer, and a closed backend sends nothing.
func TestBatchRoundTripFails(t *testing.T) {
	calls := func() []backend.Call {
		return []backend.Call{
			acquireOp("a", "alice", newAttempt(), false),
			renewOp(backend.RenewRequest{Key: "b", Owner: "alice", Attempt: newAttempt(), Token: 1, TTL: time.Minute}),
			releaseOp(backend.ReleaseRequest{Key: "c", Owner: "alice", Attempt: newAttempt()}),
			acquireOp("", "alice", newAttempt(), false),
		}
	}
	check := func(t *testing.T, calls []backend.Call, want func(error) bool) {
		t.Helper()
		for i, c := range calls[:3] {
			if c.Err == nil || !want(c.Err) || c.Grant.Acquired || isNotHeld(c.Err) {
				t.Errorf("call %d (%v): %+v, %v", i, c.Op, c.Grant, c.Err)
			}
		}
		if !errors.Is(calls[3].Err, backend.ErrInvalidRequest) {
			t.Errorf("invalid call: %v", calls[3].Err)
		}
	}

	t.Run("closed client", func(t *testing.T) {
		redistest.Client(t) // skip or fail clearly when Redis is missing
		cl := redistest.NewClient(t, redistest.Addr())
		b := newTestBackend(t, cl)
		_ = cl.Close()
		cs := calls()
		b.Batch(ctxT(t), cs)
		check(t, cs, func(err error) bool { return errors.Is(err, goredis.ErrClosed) })
	})
	t.Run("unreachable", func(t *testing.T) {
		cl := goredis.NewClient(&goredis.Options{
			Addr: "127.0.0.1:" + itoa(redistest.FreePort(t)), MaxRetries: -1, DialerRetries: 1,
			DialTimeout: time.Second, ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { _ = cl.Close() })
		b, err := New(cl, WithEvictionAllowed())
		if err != nil {
			t.Fatal(err)
		}
		closeAtEnd(t, b)
		cs := calls()
		b.Batch(ctxT(t), cs)
		check(t, cs, func(err error) bool {
			var reply goredis.Error
			return !errors.As(err, &reply) // a fault, not an answer from Redis
		})
	})
	t.Run("closed backend", func(t *testing.T) {
		b := newTestBackend(t, redistest.Client(t))
		_ = b.Close()
		cs := calls()
		b.Batch(ctxT(t), cs)
		check(t, cs, func(err error) bool { return errors.Is(err, ErrClosed) })
	})
}

// A server that forgot the scripts (SCRIPT FLUSH, as after a restart or a
// failover) is given them again and runs the batch.
func TestBatchAfterScriptFlush(t *testing.T) {
	s := redistest.Start(t) // its own server: the test empties the script cache
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	g := mustAcquire(t, b, "renewed", "alice", time.Minute)
	r := mustAcquire(t, b, "released", "alice", time.Minute)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	calls := []backend.Call{
		acquireOp("new", "bob", newAttempt(), false),
		renewOp(g.renew(time.Minute)),
		releaseOp(r.release()),
		acquireOp("released", "bob", newAttempt(), false),
	}
	b.Batch(ctx, calls)
	for i, call := range calls {
		if call.Err != nil || (call.Op != backend.OpRelease && !call.Grant.Acquired) {
			t.Errorf("call %d after SCRIPT FLUSH: %+v, %v", i, call.Grant, call.Err)
		}
	}
	mustHolder(t, b, "released", "bob")
	known, err := c.ScriptExists(ctx, acquireScript.Hash(), renewScript.Hash(), releaseScript.Hash()).Result()
	if err != nil || !known[0] || !known[1] || !known[2] {
		t.Fatalf("scripts not loaded again: %v, %v", known, err)
	}

	// A lone call goes as the single call does, and copes the same way.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lone := []backend.Call{acquireOp("lone", "bob", newAttempt(), false)}
	b.Batch(ctx, lone)
	if lone[0].Err != nil || !lone[0].Grant.Acquired {
		t.Fatalf("lone call after SCRIPT FLUSH: %+v, %v", lone[0].Grant, lone[0].Err)
	}
	mustHolder(t, b, "lone", "bob")
}

// A call refused with NOSCRIPT is sent again only when no later call on its
// name ran: it would otherwise run out of order.
func TestRefusedForNoScriptKeepsOrder(t *testing.T) {
	ctx := context.Background()
	call := func(name string, err error) *scriptCall {
		c := &scriptCall{name: name}
		c.fail(ctx, err)
		if err == nil {
			c.cmd.SetVal(int64(1))
		}
		return c
	}
	noScript := goredis.ErrNoScript
	calls := []*scriptCall{
		0: call("k", noScript),
		1: call("k", nil), // ran: call 0 can no longer run before it
		2: call("l", noScript),
		3: call("k", noScript),
		4: call("m", noScript),
		5: call("m", noScript),
		6: call("n", errors.New("i/o timeout")), // may have run
		7: call("l", noScript),
	}
	got := refusedForNoScript(calls)
	want := []*scriptCall{calls[2], calls[3], calls[4], calls[5], calls[7]}
	if len(got) != len(want) {
		t.Fatalf("%d calls to send again, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("call %d to send again is %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Under replica confirmation one WAIT confirms the batch; when it cannot,
// grants are given back and answered with ErrNotConfirmed (the name is
// free again), renewals fail with ErrNotConfirmed, releases stand.
func TestBatchWithReplicaConfirmation(t *testing.T) {
	primary, replica := startReplicated(t)
	c := redistest.NewClient(t, primary.Addr())
	// Generous: a loaded machine may take a while to acknowledge.
	b := newTestBackend(t, c, WithReplicaConfirmation(1, 4*time.Second))
	ctx := ctxT(t)
	g := mustAcquire(t, b, "renewed", "alice", time.Minute)
	r := mustAcquire(t, b, "released", "alice", time.Minute)
	if err := c.ScriptFlush(ctx).Err(); err != nil { // the second pipeline has its WAIT too
		t.Fatal(err)
	}
	calls := []backend.Call{
		acquireOp("new", "bob", newAttempt(), false),
		renewOp(g.renew(time.Minute)),
		releaseOp(r.release()),
	}
	b.Batch(ctx, calls)
	for i, call := range calls {
		if call.Err != nil || (call.Op != backend.OpRelease && !call.Grant.Acquired) {
			t.Fatalf("confirmed call %d: %+v, %v", i, call.Grant, call.Err)
		}
	}

	replica.Kill()
	// Nothing can be confirmed now: a short timeout says so sooner.
	b, err := New(c, WithKeyPrefix(b.cfg.prefix), WithReplicaConfirmation(1, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b)
	calls = []backend.Call{
		acquireOp("unconfirmed", "bob", newAttempt(), false),
		acquireOp("other", "bob", newAttempt(), false),
		renewOp(g.renew(time.Minute)),
		releaseOp(backend.ReleaseRequest{Key: "new", Owner: "nobody", Attempt: newAttempt()}),
	}
	b.Batch(ctx, calls)
	for _, i := range []int{0, 1} {
		if !errors.Is(calls[i].Err, ErrNotConfirmed) || calls[i].Grant.Acquired {
			t.Errorf("unconfirmed grant %d: %+v, %v; want ErrNotConfirmed", i, calls[i].Grant, calls[i].Err)
		}
		mustHolder(t, b, calls[i].Acquire.Key, "")
	}
	if !errors.Is(calls[2].Err, ErrNotConfirmed) {
		t.Errorf("unconfirmed renewal: %v", calls[2].Err)
	}
	if calls[3].Err != nil {
		t.Errorf("release: %v", calls[3].Err)
	}
	lone := []backend.Call{acquireOp("lone", "bob", newAttempt(), false)}
	b.Batch(ctx, lone)
	if !errors.Is(lone[0].Err, ErrNotConfirmed) || lone[0].Grant.Acquired {
		t.Errorf("unconfirmed lone grant: %+v, %v; want ErrNotConfirmed", lone[0].Grant, lone[0].Err)
	}
	mustHolder(t, b, "lone", "")
}
