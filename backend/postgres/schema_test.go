package postgres

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/backend"
)

func TestIdentifierValidation(t *testing.T) {
	bad := []struct{ schema, table string }{
		{"", "leases"},
		{"lease", ""},
		{"le\x00ase", "leases"},
		{"lease", "lea\x00ses"},
		{"\xff", "leases"},
		{strings.Repeat("s", 64), "leases"},
		{"lease", strings.Repeat("t", MaxTableBytes+1)},
	}
	for _, c := range bad {
		if _, err := New(poolStub(t), WithTable(c.schema, c.table)); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("New(schema %q, table %q) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
		if err := EnsureSchema(context.Background(), poolStub(t), c.schema, c.table); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("EnsureSchema(%q, %q) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
		if s := CreateScript(c.schema, c.table); !strings.HasPrefix(s, "--") || strings.Count(s, "\n") != 1 {
			t.Errorf("CreateScript(%q, %q) = %q, want a one-line comment", c.schema, c.table, s)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

// poolStub is a pool that never connects (nothing listens on port 1): New
// does no I/O and invalid names are rejected before any.
func poolStub(t *testing.T) *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestCreateScriptDefault(t *testing.T) {
	s := CreateScript(DefaultSchema, DefaultTable)
	for _, want := range []string{
		`CREATE SCHEMA IF NOT EXISTS "lease"`,
		`CREATE SEQUENCE IF NOT EXISTS "lease"."leases_token_seq" AS bigint MINVALUE 1 START WITH 1 CACHE 1 NO CYCLE`,
		`CREATE TABLE IF NOT EXISTS "lease"."leases"`,
		`lease_name        text COLLATE "C" NOT NULL PRIMARY KEY`,
		`CREATE INDEX IF NOT EXISTS "leases_expires_at_idx" ON "lease"."leases" (expires_at)`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("CreateScript lacks %q:\n%s", want, s)
		}
	}
}

// Hostile schema and table names are quoted: the script and the backend work
// on exactly the named objects and nothing else is created or dropped.
func TestHostileIdentifiersAreQuoted(t *testing.T) {
	admin := newPool(t, "lh_admin")
	ctx := ctxT(t)
	schema := randomName(`lh_test_"; DROP SCHEMA public; -- [x] /* `)
	table := `le"a'ses]; --`
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+newNames(schema, table).schema+" CASCADE")
	})
	// Run the script out of band, as an operator would, in the simple protocol.
	if _, err := admin.Exec(ctx, CreateScript(schema, table)); err != nil {
		t.Fatalf("CreateScript DDL failed: %v", err)
	}
	if err := EnsureSchema(ctx, admin, schema, table); err != nil {
		t.Fatalf("EnsureSchema after the script: %v", err)
	}
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = $1 AND c.relname IN ($2, $3, $4)`,
		schema, table, table+seqSuffix, table+indexSuffix).Scan(&n); err != nil || n != 3 {
		t.Fatalf("objects under the exact names: %d, %v", n, err)
	}
	b, err := New(admin, WithTable(schema, table))
	if err != nil {
		t.Fatal(err)
	}
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "a", TTL: time.Minute})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire on hostile table = %+v, %v", g, err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "a", Token: g.Token}); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureSchemaConcurrentAndIdempotent(t *testing.T) {
	admin := newPool(t, "lh_admin")
	ctx := ctxT(t)
	schema := randomName("lh_test_")
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+newNames(schema, "x").schema+" CASCADE")
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- EnsureSchema(ctx, admin, schema, "leases") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent EnsureSchema: %v", err)
		}
	}
	// Rows survive a later EnsureSchema.
	b, err := New(admin, WithTable(schema, DefaultTable))
	if err != nil {
		t.Fatal(err)
	}
	g := mustAcquire(t, b, "k", "a", time.Minute)
	if err := EnsureSchema(ctx, admin, schema, "leases"); err != nil {
		t.Fatal(err)
	}
	if busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "b", TTL: time.Minute}); err != nil || busy.Acquired || busy.Holder != "a" {
		t.Fatalf("holding lost after EnsureSchema: %+v, %v (token %d)", busy, err, g.Token)
	}
}

// Dropping and re-creating the table does not restart tokens: the sequence
// is not owned by the table.
func TestTokensSurviveTableRecreation(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	g1 := mustAcquire(t, b, "k", "a", time.Minute)
	if _, err := e.admin.Exec(ctx, "DROP TABLE "+b.names.table); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSchema(ctx, e.admin, e.schema, e.table); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "b", time.Minute)
	if g2.Token <= g1.Token {
		t.Fatalf("token %d after re-creation, was %d", g2.Token, g1.Token)
	}
}

// The backend's log never shows the connection password (it never has the
// DSN, only a pool) while it logs retries and failures. The test server
// trusts local connections, so a password set on the pool is sent to no
// effect, and must appear nowhere in the log.
func TestLogsCarryNoPassword(t *testing.T) {
	const secret = "s3cret-Pa55word-never-logged"
	e := newEnv(t)
	e.pool = newPool(t, e.appName, func(c *pgxpool.Config) { c.ConnConfig.Password = secret })
	var buf bytes.Buffer
	var mu sync.Mutex
	h := slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug})
	b := e.backend(t, WithLogger(slog.New(h)), WithSweep(-1, 0))
	keys, listening, stop := watching(t, b)
	await(t, listening, "LISTEN")
	mustAcquire(t, b, "k", "a", time.Minute)
	e.terminate(t) // the backend's conns and its LISTEN conn: retries and a reconnect are logged
	mustAcquire(t, b, "k", "a", time.Minute)
	await(t, listening, "LISTEN after terminate")
	if err := b.Release(ctxT(t), backend.ReleaseRequest{Key: "k", Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	await(t, keys, "release")
	stop()
	mu.Lock()
	defer mu.Unlock()
	log := buf.String()
	if !strings.Contains(log, "retrying") || !strings.Contains(log, "reconnecting") {
		t.Fatalf("the retry and the reconnect were not logged:\n%s", log)
	}
	if strings.Contains(log, secret) {
		t.Fatalf("the log contains the connection password:\n%s", log)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
