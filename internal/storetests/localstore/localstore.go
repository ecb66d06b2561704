// Package localstore gives tests a backend on the machine's own Redis,
// PostgreSQL or MariaDB/MySQL (LEASEHOLD_REDIS_ADDR, LEASEHOLD_POSTGRES_DSN,
// LEASEHOLD_MYSQL_DSN, or their default addresses), closed when the test
// ends. Without the service a test skips,
// or fails when LEASEHOLD_REQUIRE_SERVICES is 1 (as under make test).
package localstore

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" database/sql driver
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/mysql"
	"github.com/leasehold/leasehold/backend/postgres"
	"github.com/leasehold/leasehold/backend/redis"
)

// RedisAddr is the local Redis's address.
func RedisAddr() string {
	if addr := os.Getenv("LEASEHOLD_REDIS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// Redis is a backend on the local Redis.
func Redis(t testing.TB) backend.Backend {
	t.Helper()
	addr := RedisAddr()
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		missing(t, "no Redis at "+addr, err)
	}
	b, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// PostgresDSN is the local PostgreSQL's DSN.
func PostgresDSN() string {
	if dsn := os.Getenv("LEASEHOLD_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Postgres is a backend on the local PostgreSQL, on table leases of schema.
func Postgres(t testing.TB, schema string) backend.Backend {
	t.Helper()
	dsn := PostgresDSN()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		missing(t, "no PostgreSQL (LEASEHOLD_POSTGRES_DSN)", err)
	}
	t.Cleanup(pool.Close)
	if err := postgres.EnsureSchema(ctx, pool, schema, "leases"); err != nil {
		t.Fatal(err)
	}
	b, err := postgres.New(pool, postgres.WithTable(schema, "leases"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// MySQLDSN is the local MariaDB's (or MySQL's) DSN.
func MySQLDSN() string {
	if dsn := os.Getenv("LEASEHOLD_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// MySQLDB opens the local MariaDB/MySQL, closed when the test ends.
func MySQLDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", MySQLDSN())
	if err != nil {
		t.Fatalf("LEASEHOLD_MYSQL_DSN: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		missing(t, "no MySQL/MariaDB (LEASEHOLD_MYSQL_DSN)", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// MySQL is a backend on the local MariaDB/MySQL, on table leases of schema
// (a database of its own), which it creates.
func MySQL(t testing.TB, schema string) backend.Backend {
	t.Helper()
	db := MySQLDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mysql.EnsureSchema(ctx, db, schema, "leases"); err != nil {
		t.Fatal(err)
	}
	return mysqlOn(t, db, schema)
}

// MySQLOn is a backend on the table leases of schema, which another process
// of the test has created (MySQL).
func MySQLOn(t testing.TB, schema string) backend.Backend {
	t.Helper()
	return mysqlOn(t, MySQLDB(t), schema)
}

func mysqlOn(t testing.TB, db *sql.DB, schema string) backend.Backend {
	t.Helper()
	b, err := mysql.New(db, mysql.WithTable(schema, "leases"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func missing(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s: %v", what, err)
	}
	t.Skipf("%s: %v", what, err)
}
