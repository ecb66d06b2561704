package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
)

// The server crashes and restarts while a lease is held through a Manager.
// The holder cannot renew, so it loses the lease by its TTL (ReasonExpired);
// nobody is granted the name while the server is down (faults are faults,
// not "not acquired"); after the restart the row is still there, the next
// owner gets the name only after the old holder's expiry (both on the
// server's clock), with a greater token; the release watch reconnects by
// itself. The old holder's releases fail meanwhile (an injected fault): its
// engine would otherwise release the lost holding as soon as the server is
// back, and whether that came before the checks below would depend on
// timing.
func TestServerRestartWhileHeld(t *testing.T) {
	srv := startPrivateServer(t)
	ctx := ctxT(t)
	pool, err := pgxpool.New(ctx, srv.dsn())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := EnsureSchema(ctx, pool, DefaultSchema, DefaultTable); err != nil {
		t.Fatal(err)
	}
	b, err := New(pool, WithRetry(3, 5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	watched, err := New(pool)
	if err != nil {
		t.Fatal(err)
	}
	keys, listening, _ := watching(t, watched)
	await(t, listening, "LISTEN")

	faultyA, bA := backendtest.Wrap(b)
	mA := newManager(t, bA, "a")
	mB := newManager(t, b, "b")
	sub := mA.Subscribe(4)
	defer sub.Close()
	const ttl = time.Second
	la, err := mA.Acquire(ctx, "job", leasehold.WithTTL(ttl), leasehold.WithRenewEvery(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	before := la.Token()
	attempt := faultyA.AttemptOf("job") // to name the old holding after the takeover
	faultyA.FailRelease.Store(true)

	srv.stop(t, "immediate")
	_, err = mB.Acquire(ctx, "job", leasehold.WithTTL(ttl))
	if err == nil || errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatalf("Acquire with the server down = %v, want a backend fault", err)
	}
	select {
	case <-la.Lost():
	case <-time.After(20 * ttl): // it is lost by its local deadline, one TTL after its last renewal
		t.Fatal("the holder did not lose its lease while the server was down")
	}
	if !errors.Is(la.Err(), leasehold.ErrLost) {
		t.Fatalf("holder's Err = %v, want ErrLost", la.Err())
	}
	ev := await(t, sub.Events(), "LostEvent")
	if ev.Reason != leasehold.ReasonExpired || ev.Token != before {
		t.Fatalf("LostEvent = %+v, want ReasonExpired for token %d", ev, before)
	}
	lostAt := time.Now()

	srv.start(t)
	admin, err := pgxpool.New(ctx, srv.dsn()) // no connection from before the crash
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	var oldExpiry time.Time
	if err := admin.QueryRow(ctx, "SELECT expires_at FROM lease.leases WHERE lease_name = 'job'").Scan(&oldExpiry); err != nil {
		t.Fatalf("the old holding after the restart: %v", err)
	}
	lb, err := mB.Acquire(ctx, "job", leasehold.WithTTL(time.Minute), leasehold.WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("Acquire after restart: %v", err)
	}
	var grantedAt time.Time
	if err := admin.QueryRow(ctx, "SELECT acquired_at FROM lease.leases WHERE lease_name = 'job'").Scan(&grantedAt); err != nil {
		t.Fatal(err)
	}
	if grantedAt.Before(oldExpiry) {
		t.Fatalf("next owner granted at %v, before the old holder's expiry %v", grantedAt, oldExpiry)
	}
	faultyA.FailRelease.Store(false) // a late release of the old holding now finds nothing
	if lb.Token() <= before {
		t.Fatalf("token %d after the restart, was %d", lb.Token(), before)
	}
	t.Logf("holder lost at %v; next owner granted %v later with token %d (was %d)",
		lostAt.Format(time.StampMilli), time.Since(lostAt).Round(time.Millisecond), lb.Token(), before)

	await(t, listening, "LISTEN after the restart")
	markWaited(t, b, "job")
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if k := await(t, keys, "release after the restart"); k != "job" {
		t.Fatalf("watch reported %q, want job", k)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "job", Owner: "a", Attempt: attempt, Token: before, TTL: ttl}); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("old holder's renewal = %v, want ErrNotHeld", err)
	}
}

func newManager(t *testing.T, b backend.Backend, owner string) *leasehold.Manager {
	t.Helper()
	m, err := leasehold.New(b, leasehold.WithOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}
