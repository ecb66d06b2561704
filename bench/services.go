package main

import (
	"context"
	"database/sql"
	"fmt"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/microsoft/go-mssqldb" // the "sqlserver" database/sql driver
	goredis "github.com/redis/go-redis/v9"
)

// benchAppName marks the bench's own PostgreSQL connections, so that chaos
// terminates those and no one else's.
const benchAppName = "leasehold-bench"

// redisClient dials the run's Redis with a pool for every goroutine of the
// process; every contender gets the same settings.
func redisClient(c runConfig) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr:                  c.RedisAddr,
		PoolSize:              c.Goroutines + 8,
		ContextTimeoutEnabled: true,
	})
}

// postgresPool opens the run's PostgreSQL pool, tagged with benchAppName.
func postgresPool(ctx context.Context, c runConfig) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.PostgresDSN)
	if err != nil {
		// pgx's parse errors can quote the DSN, password included.
		return nil, fmt.Errorf("%w: PostgreSQL DSN does not parse", errConfig)
	}
	cfg.MaxConns = int32(c.Goroutines + 4)
	cfg.ConnConfig.RuntimeParams["application_name"] = benchAppName
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres at %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres at %s: %w", cfg.ConnConfig.Host, err)
	}
	return pool, nil
}

// mysqlDB opens the run's MySQL or MariaDB server.
func mysqlDB(ctx context.Context, c runConfig) (*sql.DB, error) {
	cfg, err := mysqldrv.ParseDSN(c.MySQLDSN)
	if err != nil {
		// The driver's parse errors can quote the DSN, password included.
		return nil, fmt.Errorf("%w: MySQL DSN does not parse", errConfig)
	}
	cfg.Logger = quietDriver{}
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: MySQL DSN: %w", errConfig, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(c.Goroutines + 4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql at %s: %w", cfg.Addr, err)
	}
	return db, nil
}

// sqlServerDB opens the run's SQL Server.
func sqlServerDB(ctx context.Context, c runConfig) (*sql.DB, error) {
	db, err := sql.Open("sqlserver", c.SQLServerDSN)
	if err != nil {
		return nil, fmt.Errorf("%w: SQL Server DSN does not parse", errConfig)
	}
	db.SetMaxOpenConns(c.Goroutines + 4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlserver: %w", err)
	}
	return db, nil
}

// quietDriver drops the MySQL driver's own log lines (a broken connection
// under chaos): the errors the backend returns say it all.
type quietDriver struct{}

func (quietDriver) Print(...any) {}
