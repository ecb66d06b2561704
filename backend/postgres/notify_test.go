package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

// listener LISTENs on b's channel on a connection of its own and returns the
// next notification's payload on each call.
func listener(t *testing.T, b *Backend) (next func() string) {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), testDSN())
	if err != nil {
		t.Fatalf("connect listener: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctxT(t), "LISTEN "+pgx.Identifier{b.Channel()}.Sanitize()); err != nil {
		t.Fatalf("LISTEN: %v", err)
	}
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("waiting for a notification: %v", err)
		}
		return n.Payload
	}
}

// Only releases (and revokes) of holdings that a waiting attempt was refused
// by are announced. Notifications arrive in commit order, so a marked release
// made last that is heard first proves that the ones before it sent nothing.
func TestOnlyWaitedForReleasesNotify(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	next := listener(t, b)
	ctx := ctxT(t)

	// Refused without Wait: no mark.
	u := mustAcquire(t, b, "unmarked", "a", live)
	if g := acquireAs(t, b, "unmarked", "b", newAttempt(), live); g.Acquired {
		t.Fatal("second holder granted")
	}
	if err := b.Release(ctx, u.releaseReq()); err != nil {
		t.Fatal(err)
	}
	r := mustAcquire(t, b, "revoked", "a", live)
	if _, removed, err := b.Revoke(ctx, "revoked", r.Token); err != nil || !removed {
		t.Fatalf("Revoke = %v, %v", removed, err)
	}
	// A mark does not outlive its holding: the next holder starts unmarked.
	short := mustAcquire(t, b, "takeover", "a", 50*time.Millisecond)
	markWaited(t, b, "takeover")
	waitPast(t, e.admin, short.ExpiresAt)
	tk := mustAcquire(t, b, "takeover", "b", live)
	if err := b.Release(ctx, tk.releaseReq()); err != nil {
		t.Fatal(err)
	}
	// A waiting acquire made through Batch marks like a single one; a
	// refresh of the holding keeps the mark.
	m := mustAcquire(t, b, "marked", "a", live)
	calls := []backend.Call{{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "marked", Owner: "b", Attempt: newAttempt(), TTL: live, Wait: true}}}
	b.Batch(ctx, calls)
	if calls[0].Err != nil || calls[0].Grant.Acquired {
		t.Fatalf("waiting acquire in a batch = %+v, %v; want a refusal", calls[0].Grant, calls[0].Err)
	}
	if g := acquireAs(t, b, "marked", "a", m.attempt, live); !g.Acquired || g.Token != m.Token {
		t.Fatalf("refresh = %+v", g.Grant)
	}
	if err := b.Release(ctx, m.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "marked" {
		t.Fatalf("first notification for %q, want marked: an unmarked release was announced", got)
	}
	// A marked revoke is announced too.
	rv := mustAcquire(t, b, "revoked", "a", live)
	markWaited(t, b, "revoked")
	if _, removed, err := b.Revoke(ctx, "revoked", rv.Token); err != nil || !removed {
		t.Fatalf("Revoke = %v, %v", removed, err)
	}
	if got := next(); got != "revoked" {
		t.Fatalf("notification for %q, want revoked", got)
	}
}
