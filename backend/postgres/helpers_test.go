package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDSN is the server the tests use: LEASEHOLD_POSTGRES_DSN, or the local
// default of every development and CI machine.
func testDSN() string {
	if dsn := os.Getenv("LEASEHOLD_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// newPool connects to the test server with application_name set to appName
// (so that a test can find and terminate exactly its own connections). An
// unreachable server skips the test, or fails it under
// LEASEHOLD_REQUIRE_SERVICES=1.
func newPool(t testing.TB, appName string, adjust ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN())
	if err != nil {
		t.Fatalf("LEASEHOLD_POSTGRES_DSN is not a valid DSN: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	for _, f := range adjust {
		f(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		// err never contains the password: pgx redacts it.
		msg := "PostgreSQL is not reachable at " + cfg.ConnConfig.Host + " (set LEASEHOLD_POSTGRES_DSN): " + err.Error()
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(pool.Close)
	return pool
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// testEnv is one isolated lease table: its own schema, dropped at cleanup.
type testEnv struct {
	pool    *pgxpool.Pool // the backend's pool
	admin   *pgxpool.Pool // for inspection and fault injection
	schema  string
	table   string
	appName string
}

// newEnv creates a fresh schema with the lease table and a pool for it.
func newEnv(t testing.TB) *testEnv {
	t.Helper()
	e := &testEnv{schema: randomName("lh_test_"), table: "leases", appName: randomName("lh_app_")}
	e.admin = newPool(t, "lh_admin")
	e.pool = newPool(t, e.appName)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := EnsureSchema(ctx, e.admin, e.schema, e.table); err != nil {
		t.Fatalf("EnsureSchema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := e.admin.Exec(ctx, "DROP SCHEMA "+newNames(e.schema, e.table).schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema: %v", err)
		}
	})
	return e
}

// backend returns a Backend on the env's table.
func (e *testEnv) backend(t testing.TB, opts ...Option) *Backend {
	t.Helper()
	b, err := New(e.pool, append([]Option{WithTable(e.schema, e.table)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// terminate ends every server process of the backend's pool (and only those)
// and reports how many it ended. It returns once they are gone: a test that
// goes on never races with a process that is still shutting down.
func (e *testEnv) terminate(t testing.TB) int {
	t.Helper()
	n, err := e.kill(context.Background())
	if err != nil {
		t.Fatalf("terminate backends: %v", err)
	}
	return n
}

// kill is terminate for goroutines other than the test's: it reports
// failures instead of ending the test.
func (e *testEnv) kill(ctx context.Context) (int, error) {
	var pids []int32
	// MATERIALIZED: the filter is applied before anything is terminated.
	err := e.admin.QueryRow(ctx,
		`WITH mine AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid())
		 SELECT coalesce(array_agg(pid), '{}') FROM mine WHERE pg_terminate_backend(pid)`, e.appName).Scan(&pids)
	if err != nil {
		return 0, err
	}
	err = pollServer(ctx, "terminated server processes to exit", func() (bool, error) {
		var n int
		err := e.admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", pids).Scan(&n)
		return n == 0, err
	})
	return len(pids), err
}

// pollServer polls the server until cond holds: for state that only the
// server can tell (a process gone, a lock waited on), polling is the only
// signal there is. The limit is far beyond what any of these takes.
func pollServer(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitPast waits until the server's clock has passed t (an expiry the
// server reported): expiry is decided on that clock, which nothing signals,
// so the server is asked rather than the local clock trusted to agree.
func waitPast(tb testing.TB, db *pgxpool.Pool, t time.Time) {
	tb.Helper()
	err := pollServer(context.Background(), "the server's clock to pass "+t.String(), func() (bool, error) {
		var past bool
		err := db.QueryRow(context.Background(), "SELECT clock_timestamp() > $1", t).Scan(&past)
		return past, err
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// waitServer waits until d has passed on the server's clock.
func waitServer(tb testing.TB, db *pgxpool.Pool, d time.Duration) {
	tb.Helper()
	var now time.Time
	if err := db.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		tb.Fatal(err)
	}
	waitPast(tb, db, now.Add(d))
}

// rows returns the number of rows in the env's table.
func (e *testEnv) rows(t testing.TB) int {
	t.Helper()
	var n int
	if err := e.admin.QueryRow(context.Background(), "SELECT count(*) FROM "+newNames(e.schema, e.table).table).Scan(&n); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return n
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
