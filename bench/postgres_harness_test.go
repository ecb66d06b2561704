package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testPostgresDSN is LEASEHOLD_POSTGRES_DSN (default: the local test
// database); the test is skipped when it cannot connect, or fails with
// LEASEHOLD_REQUIRE_SERVICES=1.
func testPostgresDSN(t *testing.T) string {
	t.Helper()
	dsn := envOr("LEASEHOLD_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		conn.Close(ctx)
		return dsn
	}
	if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
		t.Fatalf("no PostgreSQL: %v", err)
	}
	t.Skipf("no PostgreSQL: %v; set LEASEHOLD_REQUIRE_SERVICES=1 to fail instead", err)
	return ""
}

// Leasehold and pglock's protocol side by side on PostgreSQL, in one
// process each.
func TestPostgresContenders(t *testing.T) {
	dsn := testPostgresDSN(t)
	for _, lock := range []string{lockLeasehold, lockPGLock} {
		t.Run(lock, func(t *testing.T) {
			c := testConfig(t, backendPostgres, lock, 1, 2, 500*time.Millisecond)
			c.PostgresDSN = dsn
			c.PeerPoll = 5 * time.Millisecond
			r := mustRun(t, c, inProcessLauncher{})
			if r.Acquisitions == 0 || r.Safety.Overlaps != 0 {
				t.Fatalf("%s: %d acquisitions, %d overlaps %+v", lock, r.Acquisitions, r.Safety.Overlaps, r.Safety.OverlapSamples)
			}
		})
	}
}
