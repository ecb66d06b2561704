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
		if err := ValidateTable(c.schema, c.table); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("ValidateTable(%q, %q) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
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
	for _, c := range []struct{ schema, table string }{
		{DefaultSchema, DefaultTable},
		{`we"ird; --`, strings.Repeat("t", MaxTableBytes)},
	} {
		if err := ValidateTable(c.schema, c.table); err != nil {
			t.Errorf("ValidateTable(%q, %q) = %v", c.schema, c.table, err)
		}
	}
}

// Options cannot fail: New reports a value it cannot use, naming the option.
func TestNewRefusesBadOptions(t *testing.T) {
	for want, opt := range map[string]Option{
		"WithSweep(-1ns, 100)":  WithSweep(-1, 100),
		"WithSweep(1s, -1)":     WithSweep(time.Second, -1),
		"WithRetry(0, 5ms, 1s)": WithRetry(0, 5*time.Millisecond, time.Second),
		"WithRetry(2, 0s, 1s)":  WithRetry(2, 0, time.Second),
		"WithRetry(2, 1s, 1ms)": WithRetry(2, time.Second, time.Millisecond),
	} {
		_, err := New(poolStub(t), opt)
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%s) = %v, want ErrInvalidOption naming it", want, err)
		}
	}
	for _, opt := range []Option{WithSweep(0, 0), WithSweep(time.Minute, 1), WithRetry(1, time.Millisecond, time.Millisecond), WithLogger(nil)} {
		if _, err := New(poolStub(t), opt); err != nil {
			t.Errorf("New with a usable option: %v", err)
		}
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
		`attempt           text COLLATE "C" NOT NULL CHECK (octet_length(attempt) <= 64)`,
		`ALTER TABLE "lease"."leases" ADD COLUMN IF NOT EXISTS attempt text COLLATE "C" NOT NULL DEFAULT '' CHECK (octet_length(attempt) <= 64)`,
		`ALTER TABLE "lease"."leases" ALTER COLUMN attempt DROP DEFAULT`,
		`waited            boolean NOT NULL DEFAULT false`,
		`ALTER TABLE "lease"."leases" ADD COLUMN IF NOT EXISTS waited boolean NOT NULL DEFAULT false`,
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
	g := mustAcquire(t, b, "k", "a", live)
	if _, err := b.Renew(ctx, g.renewReq(live)); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, g.releaseReq()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, "k", "b", live)
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
	g := mustAcquire(t, b, "k", "a", live)
	if err := EnsureSchema(ctx, admin, schema, "leases"); err != nil {
		t.Fatal(err)
	}
	if busy := acquireAs(t, b, "k", "b", newAttempt(), live); busy.Acquired || busy.Holder != "a" || busy.HolderToken != g.Token {
		t.Fatalf("holding lost after EnsureSchema: %+v (token %d)", busy.Grant, g.Token)
	}
	if _, err := b.Renew(ctx, g.renewReq(live)); err != nil {
		t.Fatalf("renewal after EnsureSchema: %v", err)
	}
}

// Dropping and re-creating the table does not restart tokens: the sequence
// is not owned by the table.
func TestTokensSurviveTableRecreation(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	g1 := mustAcquire(t, b, "k", "a", live)
	if _, err := e.admin.Exec(ctx, "DROP TABLE "+b.names.table); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSchema(ctx, e.admin, e.schema, e.table); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "b", live)
	if g2.Token <= g1.Token {
		t.Fatalf("token %d after re-creation, was %d", g2.Token, g1.Token)
	}
}

// The backend's log never shows the connection password (it never has the
// DSN, only a pool) while it logs retries and failures. The test server
// trusts local connections, so a password set on the pool is sent to no
// effect, and must appear nowhere in the log.
//
// Both a retry and a reconnect must happen, whatever the load. The pools do
// not ping: pgxpool pings a connection idle for over a second before handing
// it out and silently replaces a dead one, so on a slow run the acquire after
// the terminate found a fresh connection and nothing was retried (this test
// failed so, once). Without the ping, the acquire is handed the dead
// connection and must retry. The watch has a pool of its own, so that its
// reconnect cannot take that dead connection first.
func TestLogsCarryNoPassword(t *testing.T) {
	const secret = "s3cret-Pa55word-never-logged"
	e := newEnv(t)
	noPing := func(c *pgxpool.Config) {
		c.ConnConfig.Password = secret
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	}
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.pool = newPool(t, e.appName, noPing)
	b := e.backend(t, WithLogger(logger), WithSweep(0, 0))
	e.pool = newPool(t, e.appName, noPing)
	w := e.backend(t, WithLogger(logger))
	keys, listening, stop := watching(t, w)
	await(t, listening, "LISTEN")
	mustAcquire(t, b, "k1", "a", live)
	if n := e.terminate(t); n < 2 { // b's idle connection and w's LISTEN connection
		t.Fatalf("terminated %d server processes, want b's and the watch's", n)
	}
	g := mustAcquire(t, b, "k2", "a", live) // on b's dead connection first: retried
	await(t, listening, "LISTEN after terminate")
	markWaited(t, b, "k2")
	if err := b.Release(ctxT(t), g.releaseReq()); err != nil {
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
