package frozen_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/mysql"
	"github.com/leasehold/leasehold/backend/postgres"
	"github.com/leasehold/leasehold/backend/redis"
	"github.com/leasehold/leasehold/internal/storetests/localstore"
)

// store is one store under test: the leases, and the resource the holders
// write to, through its guard or around it.
type store interface {
	backend(t *testing.T) backend.Backend
	guarded(ctx context.Context, token uint64, value string) error
	unguarded(ctx context.Context, value string) error
	read(ctx context.Context) (string, error)
}

// newStore returns the store of kind for the run named name; the parent
// (setup) creates the resource's tables and removes them at the end.
func newStore(t *testing.T, kind, name string, setup bool) store {
	t.Helper()
	switch kind {
	case "redis":
		c := goredis.NewClient(&goredis.Options{Addr: localstore.RedisAddr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		s := &redisStore{c: c, resource: name, key: "{" + name + "}:value"}
		if setup {
			t.Cleanup(func() { c.Del(context.Background(), s.key, redis.FenceKey(name)) })
		}
		return s
	case "postgres":
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		pool, err := pgxpool.New(ctx, localstore.PostgresDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s := &postgresStore{pool: pool, schema: name, table: postgres.FenceTable{Schema: name, Table: "fences"},
			data: pgx.Identifier{name, "data"}.Sanitize()}
		if setup {
			_ = localstore.Postgres(t, name) // skips, or fails, without PostgreSQL; creates the schema
			t.Cleanup(func() {
				_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
			})
			if err := postgres.EnsureFenceSchema(ctx, pool, name, "fences"); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, "CREATE TABLE "+s.data+" (resource text PRIMARY KEY, value text NOT NULL)"); err != nil {
				t.Fatal(err)
			}
		}
		return s
	case "mysql":
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		db := localstore.MySQLDB(t)
		s := &mysqlStore{db: db, schema: name, table: mysql.FenceTable{Schema: name, Table: "fences"},
			data: "`" + name + "`.`data`"}
		if setup {
			_ = localstore.MySQL(t, name) // creates the database
			t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE `" + name + "`") })
			if err := mysql.EnsureFenceSchema(ctx, db, name, "fences"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+s.data+" (resource VARBINARY(64) PRIMARY KEY, value VARCHAR(200) NOT NULL) ENGINE=InnoDB"); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	t.Fatalf("unknown store %q", kind)
	return nil
}

// redisStore writes the key {name}:value, guarded by redis.Fenced.
type redisStore struct {
	c             *goredis.Client
	resource, key string
}

func (s *redisStore) backend(t *testing.T) backend.Backend { return localstore.Redis(t) }

func (s *redisStore) guarded(ctx context.Context, token uint64, value string) error {
	return redis.Fenced(s.c, s.resource).Set(ctx, token, s.key, value, 0)
}

func (s *redisStore) unguarded(ctx context.Context, value string) error {
	return s.c.Set(ctx, s.key, value, 0).Err()
}

func (s *redisStore) read(ctx context.Context) (string, error) {
	v, err := s.c.Get(ctx, s.key).Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	return v, err
}

// postgresStore writes a row of the data table of its schema, guarded by
// postgres.Fence in the same transaction.
type postgresStore struct {
	pool   *pgxpool.Pool
	schema string
	table  postgres.FenceTable
	data   string
}

func (s *postgresStore) backend(t *testing.T) backend.Backend {
	return localstore.Postgres(t, s.schema)
}

func (s *postgresStore) guarded(ctx context.Context, token uint64, value string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.table.Fence(ctx, tx, "job", token); err != nil {
			return err
		}
		return s.write(ctx, tx, value)
	})
}

func (s *postgresStore) unguarded(ctx context.Context, value string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.write(ctx, tx, value) })
}

func (s *postgresStore) write(ctx context.Context, tx pgx.Tx, value string) error {
	_, err := tx.Exec(ctx, "INSERT INTO "+s.data+" VALUES ('job', $1) ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value", value)
	return err
}

func (s *postgresStore) read(ctx context.Context) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT value FROM "+s.data+" WHERE resource = 'job'").Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// mysqlStore writes a row of the data table of its database, guarded by
// mysql.Fence in the same transaction.
type mysqlStore struct {
	db     *sql.DB
	schema string
	table  mysql.FenceTable
	data   string
}

func (s *mysqlStore) backend(t *testing.T) backend.Backend { return localstore.MySQL(t, s.schema) }

func (s *mysqlStore) guarded(ctx context.Context, token uint64, value string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.table.Fence(ctx, tx, "job", token); err != nil {
			return err
		}
		return s.write(ctx, tx, value)
	})
}

func (s *mysqlStore) unguarded(ctx context.Context, value string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.write(ctx, tx, value) })
}

func (s *mysqlStore) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *mysqlStore) write(ctx context.Context, tx *sql.Tx, value string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO "+s.data+" VALUES ('job', ?) ON DUPLICATE KEY UPDATE value = VALUES(value)", value)
	return err
}

func (s *mysqlStore) read(ctx context.Context) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, "SELECT value FROM "+s.data+" WHERE resource = 'job'").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// patience bounds every wait for something that must happen: generous, so
// that a loaded machine does not fail the test, and finite, so that a broken
// one fails rather than hangs.
const patience = 30 * time.Second
