package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/faultproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDSN is the server the tests use: LEASEHOLD_MYSQL_DSN, or the local
// MariaDB of every development and CI machine.
func testDSN() string {
	if dsn := os.Getenv("LEASEHOLD_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// openDB opens the test server (through adjust's changes to its config). An
// unreachable server skips the test, or fails it under
// LEASEHOLD_REQUIRE_SERVICES=1.
func openDB(t testing.TB, adjust ...func(*mysqldrv.Config)) *sql.DB {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(testDSN())
	if err != nil {
		t.Fatalf("LEASEHOLD_MYSQL_DSN is not a valid DSN: %v", err)
	}
	for _, f := range adjust {
		f(cfg)
	}
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		msg := "MySQL/MariaDB is not reachable at " + cfg.Addr + " (set LEASEHOLD_MYSQL_DSN): " + err.Error()
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// testEnv is one lease table of its own in the test database, dropped at
// cleanup.
type testEnv struct {
	db            *sql.DB
	schema, table string
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	db := openDB(t)
	cfg, _ := mysqldrv.ParseDSN(testDSN())
	schema := cfg.DBName
	if schema == "" {
		schema = "test"
	}
	e := &testEnv{db: db, schema: schema, table: randomName("lh_")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureSchema(ctx, db, e.schema, e.table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, _ := newNames(e.schema, e.table)
		for _, tb := range []string{n.leases, n.holds, n.queue} {
			_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+tb)
		}
		for _, p := range procedureNames(n) {
			_, _ = db.ExecContext(ctx, "DROP PROCEDURE IF EXISTS `"+n.schema+"`.`"+p+"`")
		}
	})
	return e
}

func (e *testEnv) backend(t testing.TB, opts ...Option) *Backend {
	t.Helper()
	b, err := New(e.db, append([]Option{WithTable(e.schema, e.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// blackholed is a backend on e's table whose connections go through a fault
// proxy, and the function that black-holes the link.
func (e *testEnv) blackholed(t *testing.T) (*Backend, func()) {
	cfg, err := mysqldrv.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, func(c *mysqldrv.Config) { c.Addr = p.Addr(); c.Net = "tcp" })
	b, err := New(db, WithTable(e.schema, e.table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Blackhole(false)
		_ = b.Close()
		db.Close()
		p.Close()
	})
	return b, func() { p.Blackhole(true) }
}
