package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// While the server is down every call is a fault, never "not acquired" and
// never a renewal; once it is back empty, the old holding is gone (ErrNotHeld)
// and the next grant outbids it.
func TestServerDownIsAFaultAndRestartLosesHoldings(t *testing.T) {
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	g := mustAcquire(t, b, "k", "alice", time.Minute)

	s.Kill()
	ctx := ctxT(t)
	for range 2 { // the first call may meet the dead pooled connection, the next a refused dial
		if r, err := b.Renew(ctx, g.renew(time.Minute)); err == nil || isNotHeld(err) {
			t.Fatalf("renew with the server down = %+v, %v; want a fault", r, err)
		}
		ng, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "bob", Attempt: newAttempt(), TTL: time.Minute})
		if err == nil || ng.Acquired || ng.Holder != "" {
			t.Fatalf("acquire with the server down = %+v, %v; want a fault", ng, err)
		}
	}

	restart(t, s, c)
	if _, err := b.Renew(ctx, g.renew(time.Minute)); !isNotHeld(err) {
		t.Fatalf("renew after the restart: %v, want ErrNotHeld", err)
	}
	g2 := mustAcquire(t, b, "k", "bob", time.Minute)
	if g2.Token <= g.Token {
		t.Fatalf("token after restart %d <= %d", g2.Token, g.Token)
	}
}

// An acquire whose reply is lost may or may not have happened. Retried by the
// same attempt it is idempotent: the same holding, the same token, and nobody
// else is granted the name meanwhile (the same owner's other attempts
// included). The engine's clean-up, a release with token 0, ends exactly it.
func TestAmbiguousAcquireRetriedBySameAttemptIsIdempotent(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	direct := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, redistest.NewClient(t, p.Addr()))
	other, err := New(direct, WithKeyPrefix(b.cfg.prefix))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, other)
	ctx := ctxT(t)
	// Warm up: the connection handshake and the script cache, so that the
	// reply lost below is the acquire's own.
	mustAcquire(t, b, "warm-up", "alice", time.Minute)

	attempt := newAttempt()
	p.DropReplies(true)
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "alice", Attempt: attempt, TTL: time.Minute})
	if err == nil || g.Acquired {
		t.Fatalf("acquire with its reply lost = %+v, %v; want a fault", g, err)
	}
	if p.RepliesDropped() == 0 {
		t.Fatal("the proxy dropped no reply")
	}
	stored, err := direct.HGet(ctx, b.LeaseKey("k"), "token").Uint64()
	if err != nil {
		t.Fatalf("the acquire should have reached the server: %v", err)
	}
	mustBusy(t, other, "k", "bob", "alice")
	mustBusy(t, other, "k", "alice", "alice")

	p.DropReplies(false)
	retry := mustAcquireAs(t, b, "k", "alice", attempt, time.Minute)
	if retry.Token != stored {
		t.Fatalf("retried acquire got token %d, the lost grant had %d", retry.Token, stored)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "alice", Attempt: attempt}); err != nil {
		t.Fatal(err)
	}
	if g := mustAcquire(t, other, "k", "bob", time.Minute); g.Token <= stored {
		t.Fatalf("token %d after %d", g.Token, stored)
	}
}

// A renewal that cannot be confirmed fails: through a cut link, through a link
// that swallows the reply (the server did renew; the holder cannot know), and
// through a dead one.
func TestRenewThatCannotBeConfirmedFails(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	b := newTestBackend(t, redistest.NewClient(t, p.Addr()))
	g := mustAcquire(t, b, "k", "alice", time.Minute)
	renew := func(timeout time.Duration) (backend.Grant, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return b.Renew(ctx, g.renew(time.Minute))
	}

	p.DropReplies(true)
	if r, err := renew(5 * time.Second); err == nil || isNotHeld(err) || r.Acquired {
		t.Fatalf("renew with its reply lost = %+v, %v; want a fault", r, err)
	}
	p.DropReplies(false)

	p.Blackhole(true)
	start := time.Now()
	r, err := renew(300 * time.Millisecond)
	if err == nil || isNotHeld(err) || r.Acquired {
		t.Fatalf("renew through a dead link = %+v, %v; want a fault", r, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("renew through a dead link: %v, want the context's deadline", err)
	}
	// The bound is the context, not the client's 5 s ReadTimeout; the slack
	// is for a loaded machine.
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("renew through a dead link took %v; the context allowed 300ms", el)
	}
	p.Blackhole(false)
	p.CutAll()

	if _, err := renew(5 * time.Second); err != nil {
		t.Fatalf("renew once the link is back: %v", err)
	}
}

// A server (or link) slower than the TTL: a renewal that reaches the server
// after the lease expired is refused, never granted late, and another owner
// gets the name with a higher token in the meantime.
func TestSlowServerNeverRenewsAfterExpiry(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	direct := redistest.NewClient(t, s.Addr())
	slow := newTestBackend(t, redistest.NewClient(t, p.Addr()))
	fast, err := New(direct, WithKeyPrefix(slow.cfg.prefix))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, fast)
	const ttl = 150 * time.Millisecond
	g := mustAcquire(t, slow, "k", "alice", ttl)

	p.SetDelay(2 * ttl) // each way: the renewal arrives after the lease ended
	defer p.SetDelay(0)
	done := make(chan error, 1)
	go func() {
		_, err := slow.Renew(ctxT(t), g.renew(time.Minute))
		done <- err
	}()
	waitExpired(t, fast, "k")
	g2 := mustAcquire(t, fast, "k", "bob", time.Minute)
	if g2.Token <= g.Token {
		t.Fatalf("token %d after %d", g2.Token, g.Token)
	}
	if err := <-done; !isNotHeld(err) {
		t.Fatalf("late renewal: %v, want ErrNotHeld", err)
	}
	mustBusy(t, fast, "k", "carol", "bob")

	// And a caller that will not wait that long gets its deadline, not a grant.
	ctx, cancel := context.WithTimeout(context.Background(), ttl)
	defer cancel()
	if ng, err := slow.Acquire(ctx, backend.AcquireRequest{Key: "other", Owner: "alice", Attempt: newAttempt(), TTL: time.Minute}); err == nil || ng.Acquired {
		t.Fatalf("acquire slower than its deadline = %+v, %v", ng, err)
	}
}
