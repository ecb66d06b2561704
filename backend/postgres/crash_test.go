package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/backend"
)

// With synchronous_commit = off on the server, a commit is acknowledged
// before its WAL is written out: a crash of the server loses it, and with a
// grant the sequence's advance goes too, so the next grant repeats the lost
// grant's token. The backend commits acquire, renew and release
// synchronously whatever the server says.
//
// Here the server commits asynchronously and its WAL writer waits 10 s
// between rounds, so acknowledged commits are surely still in the server's
// memory when it is crashed (immediate stop: every server process quits at
// once, nothing is written out). Each kind of operation is the last one
// before a crash of its own (a later synchronous commit would write out the
// earlier ones too), and after each restart every acknowledged grant,
// renewal and release is there, and no token is handed out again.
func TestCrashWithAsynchronousCommitLosesNothing(t *testing.T) {
	srv := startPrivateServer(t, "synchronous_commit=off", "wal_writer_delay=10000", "autovacuum=off")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var pool *pgxpool.Pool
	connect := func() *Backend {
		t.Helper()
		var err error
		if pool, err = pgxpool.New(ctx, srv.dsn()); err != nil {
			t.Fatal(err)
		}
		b, err := New(pool, WithSweep(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := connect()
	defer func() { pool.Close() }()
	var mode string
	if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&mode); err != nil || mode != "off" {
		t.Fatalf("server synchronous_commit = %q, %v; the test needs off", mode, err)
	}
	if err := EnsureSchema(ctx, pool, DefaultSchema, DefaultTable); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil { // the table itself is not under test
		t.Fatal(err)
	}

	// What the server acknowledged: the live holdings (by key) and every
	// token handed out.
	holdings := map[string]held{}
	var freed []string
	var tokens []uint64
	grant := func(key string) {
		g := mustAcquire(t, b, key, "a", live)
		holdings[key] = g
		tokens = append(tokens, g.Token)
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"acquire", func() {
			for _, k := range []string{"k0", "k1", "k2", "k3"} {
				grant(k)
			}
		}},
		{"release", func() {
			if err := b.Release(ctx, holdings["k3"].releaseReq()); err != nil {
				t.Fatal(err)
			}
			delete(holdings, "k3")
			freed = append(freed, "k3")
		}},
		{"renew", func() {
			r, err := b.Renew(ctx, holdings["k0"].renewReq(2*live))
			if err != nil {
				t.Fatal(err)
			}
			h := holdings["k0"]
			h.ExpiresAt = r.ExpiresAt
			holdings["k0"] = h
		}},
		{"batch ending with a call that changes nothing", func() {
			// Only a transaction with an ID waits for the WAL flush: a
			// batch whose last call deletes no row must still make the
			// grant before it durable.
			calls := []backend.Call{
				{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "k4", Owner: "a", Attempt: newAttempt(), TTL: live}},
				{Op: backend.OpRelease, Release: backend.ReleaseRequest{Key: "nothing-here", Owner: "a", Attempt: newAttempt(), Token: 7}},
			}
			b.Batch(ctx, calls)
			if calls[0].Err != nil || !calls[0].Grant.Acquired || calls[1].Err != nil {
				t.Fatalf("Batch = %+v, %v; %v", calls[0].Grant, calls[0].Err, calls[1].Err)
			}
			holdings["k4"] = held{Grant: calls[0].Grant, key: "k4", owner: "a", attempt: calls[0].Acquire.Attempt}
			tokens = append(tokens, calls[0].Grant.Token)
		}},
		{"renew batch", func() {
			res, err := b.RenewBatch(ctx, []backend.RenewRequest{holdings["k1"].renewReq(3 * live)})
			if err != nil || res[0].Err != nil {
				t.Fatalf("RenewBatch = %v, %v", res, err)
			}
			h := holdings["k1"]
			h.ExpiresAt = res[0].Grant.ExpiresAt
			holdings["k1"] = h
		}},
	}
	for i, step := range steps {
		step.do()
		pool.Close()
		srv.stop(t, "immediate")
		srv.start(t)
		b = connect()

		for k, h := range holdings {
			busy := acquireAs(t, b, k, "b", newAttempt(), live)
			if busy.Acquired || busy.HolderToken != h.Token || !busy.HolderExpiresAt.Equal(h.ExpiresAt) {
				t.Errorf("crash after %s: %s is %+v; want held with token %d until %v", step.name, k, busy.Grant, h.Token, h.ExpiresAt)
			}
		}
		for _, k := range freed {
			var rows int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM lease.leases WHERE lease_name = $1", k).Scan(&rows); err != nil || rows != 0 {
				t.Errorf("crash after %s: released %s has %d rows again (%v)", step.name, k, rows, err)
			}
		}
		probe := mustAcquire(t, b, "probe"+string(rune('0'+i)), "b", live)
		for _, old := range tokens {
			if probe.Token <= old {
				t.Errorf("crash after %s: a new grant got token %d, not above %d granted before", step.name, probe.Token, old)
			}
		}
		tokens = append(tokens, probe.Token)
		if t.Failed() {
			return
		}
	}
}
