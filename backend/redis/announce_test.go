package redis

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// Only the end of a holding somebody waits for is published, as a plain
// SUBSCRIBE sees it: releases and revokes of unmarked holdings, refusals
// without Wait and expiry publish nothing; a refusal with Wait marks the
// holding until it ends (a refresh by its own attempt keeps the mark, a new
// holding starts without one); a release or revoke of a marked holding, in a
// single call or a batch, publishes the name once.
func TestOnlyWaitedReleasesArePublished(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	ps := c.Subscribe(ctx, b.Channel())
	t.Cleanup(func() { _ = ps.Close() })
	if msg, err := ps.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE: %v", err)
	} else if _, ok := msg.(*goredis.Subscription); !ok {
		t.Fatalf("SUBSCRIBE answered %T %v", msg, msg)
	}
	marked := func(key string) bool {
		t.Helper()
		return c.HGet(ctx, b.LeaseKey(key), "w").Val() == "1"
	}
	var want []string

	// Nobody waits: nothing is published.
	g := mustAcquire(t, b, "quiet", "alice", time.Minute)
	mustBusy(t, b, "quiet", "bob", "alice") // refused, but does not wait
	if marked("quiet") {
		t.Fatal("a refusal without Wait marked the holding")
	}
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, "quiet revoke", "alice", time.Minute)
	if _, removed, err := b.Revoke(ctx, "quiet revoke", 0); err != nil || !removed {
		t.Fatalf("Revoke: %v, %v", removed, err)
	}
	// A marked holding that expires publishes nothing either (the waiter
	// wakes at the expiry the refusal told it). Shortened here, so that the
	// refusal surely comes before the expiry.
	mustAcquire(t, b, "expires", "alice", time.Minute)
	waitFor(t, b, "expires", "bob")
	expireIn(t, c, b, "expires", 0)
	waitExpired(t, b, "expires")

	// Somebody waits: the end is published, once per holding.
	g = mustAcquireAs(t, b, "waited", "alice", "alice-1", time.Minute)
	waitFor(t, b, "waited", "bob")
	waitFor(t, b, "waited", "carol")                               // already marked: no second mark, no second message
	mustAcquireAs(t, b, "waited", "alice", "alice-1", time.Minute) // her retry keeps the mark
	if !marked("waited") {
		t.Fatal("the holding lost its mark")
	}
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatal(err)
	}
	want = append(want, "waited")
	// The next holding of the name starts unmarked.
	g = mustAcquire(t, b, "waited", "alice", time.Minute)
	if marked("waited") {
		t.Fatal("a new holding inherited the mark of the previous one")
	}
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatal(err)
	}

	mustAcquire(t, b, "revoked", "alice", time.Minute)
	waitFor(t, b, "revoked", "bob")
	if _, removed, err := b.Revoke(ctx, "revoked", 0); err != nil || !removed {
		t.Fatalf("Revoke: %v, %v", removed, err)
	}
	want = append(want, "revoked")

	// The same through a batch: a waiting refusal marks, the release that
	// follows it on the name publishes, an unmarked release does not.
	x := mustAcquire(t, b, "batched", "alice", time.Minute)
	y := mustAcquire(t, b, "batched quiet", "alice", time.Minute)
	calls := []backend.Call{
		acquireOp("batched", "bob", newAttempt(), true),
		releaseOp(x.release()),
		releaseOp(y.release()),
	}
	b.Batch(ctx, calls)
	for i, call := range calls {
		if call.Err != nil || call.Grant.Acquired {
			t.Fatalf("batch call %d: %+v, %v", i, call.Grant, call.Err)
		}
	}
	want = append(want, "batched")

	// A last marked release: everything published before it has arrived
	// by the time it does (one server, one connection, in order).
	releaseWaited(t, b, "last")
	want = append(want, "last")
	for _, w := range want {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("waiting for the release of %q: %v", w, err)
		}
		if msg.Payload != w {
			t.Fatalf("published %q, want %q (all published, in order: %q)", msg.Payload, w, want)
		}
	}
}

// With notifications off a waiting refusal leaves no mark: nothing would
// ever read it.
func TestNoMarkWithNotificationsOff(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c, WithReleaseNotifications(false))
	mustAcquire(t, b, "k", "alice", time.Minute)
	waitFor(t, b, "k", "bob")
	if c.HGet(ctxT(t), b.LeaseKey("k"), "w").Val() == "1" {
		t.Fatal("holding marked with notifications off")
	}
}
