package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/microsoft/go-mssqldb/msdsn"
	goredis "github.com/redis/go-redis/v9"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/etcd"
	"github.com/leasehold/leasehold/backend/postgres"
	"github.com/leasehold/leasehold/backend/redis"
	"github.com/leasehold/leasehold/backend/sqlserver"
)

// Environment variables that select a store when no store flag is given
// (the same ones the tests of each backend use).
const (
	envRedis     = "LEASEHOLD_REDIS_ADDR"
	envPostgres  = "LEASEHOLD_POSTGRES_DSN"
	envSQLServer = "LEASEHOLD_SQLSERVER_DSN"
	envEtcd      = "LEASEHOLD_ETCD_ENDPOINTS"
)

// target is the store selected by the command line: kind ("redis",
// "postgres", "sqlserver", "etcd") and address, DSN or endpoints, which may hold a password
// and is never printed as given.
type target struct {
	kind   string
	addr   string
	source string // "-postgres" or "LEASEHOLD_POSTGRES_DSN": where addr came from

	redisPrefix   string // backend key prefix (Redis); "" for the default
	etcdPrefix    string // backend key prefix (etcd); "" for the default
	schema, table string // lease table (SQL); "" for the default
	timeout       time.Duration
}

// store is an open connection to a store, with the backend on it.
type store struct {
	b    backend.Backend
	desc string // where it is, for messages: no password
	// redact hides the connection's secrets in any message (defence in
	// depth: the drivers already leave passwords out of their errors).
	redact func(string) string
	close  func()
}

// openStore connects to t and checks that the store answers within
// t.timeout. Its errors never contain a password.
func openStore(ctx context.Context, t target) (*store, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	switch t.kind {
	case "redis":
		return openRedis(ctx, t)
	case "postgres":
		return openPostgres(ctx, t)
	case "sqlserver":
		return openSQLServer(ctx, t)
	case "etcd":
		return openEtcd(ctx, t)
	}
	return nil, fmt.Errorf("unknown store kind %q", t.kind)
}

func openRedis(ctx context.Context, t target) (*store, error) {
	var opts *goredis.Options
	if strings.Contains(t.addr, "://") {
		o, err := goredis.ParseURL(t.addr)
		if err != nil {
			return nil, fmt.Errorf("%s is not a valid Redis address or URL (redis://[user:password@]host:port[/db]): %s",
				t.source, redactWith(err.Error(), urlSecrets(t.addr)))
		}
		opts = o
	} else {
		if strings.Contains(t.addr, "@") {
			// user:password@host: not shown, and only a URL carries a password.
			return nil, fmt.Errorf("%s has an @ but no redis:// scheme: give a password as redis://[user:password@]host:port", t.source)
		}
		if _, _, err := net.SplitHostPort(t.addr); err != nil {
			return nil, fmt.Errorf("%s %q is not host:port or a redis:// URL", t.source, t.addr)
		}
		opts = &goredis.Options{Addr: t.addr}
	}
	opts.ContextTimeoutEnabled = true
	opts.DialTimeout = t.timeout
	secrets := []string{opts.Password}
	redact := func(s string) string { return redactWith(s, secrets) }
	desc := "Redis at " + opts.Addr
	client := goredis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("cannot reach %s: %s", desc, redact(err.Error()))
	}
	// The CLI grants nothing, so the eviction policy (which New checks
	// for Managers, with CONFIG GET that an operator's ACL may deny) is not
	// its concern.
	ropts := []redis.Option{redis.WithEvictionAllowed()}
	if t.redisPrefix != "" {
		ropts = append(ropts, redis.WithKeyPrefix(t.redisPrefix))
	}
	b, err := redis.New(client, ropts...)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("%s: %s", desc, redact(err.Error()))
	}
	return &store{b: b, desc: desc, redact: redact, close: func() { b.Close(); client.Close() }}, nil
}

func openPostgres(ctx context.Context, t target) (*store, error) {
	cfg, err := pgxpool.ParseConfig(t.addr)
	if err != nil {
		// The parse error quotes the DSN (pgx redacts its password); only
		// the reason is shown, and whatever looks like a password hidden.
		reason := err
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			reason = pe.Unwrap()
		}
		return nil, fmt.Errorf("%s is not a valid PostgreSQL DSN: %s", t.source, redactWith(reason.Error(), urlSecrets(t.addr)))
	}
	secrets := []string{cfg.ConnConfig.Password}
	redact := func(s string) string { return redactWith(s, secrets) }
	desc := fmt.Sprintf("PostgreSQL at %s:%d (database %q, user %q)",
		cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, cfg.ConnConfig.User)
	// One connection for statements, one for the release watch (which
	// takes its connection out of the pool).
	cfg.MaxConns = 2
	cfg.MinConns = 0
	cfg.ConnConfig.ConnectTimeout = t.timeout
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "leasehold-cli"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %s", desc, redact(err.Error()))
	}
	var popts []postgres.Option
	if t.schema != "" || t.table != "" {
		popts = append(popts, postgres.WithTable(or(t.schema, postgres.DefaultSchema), or(t.table, postgres.DefaultTable)))
	}
	b, err := postgres.New(pool, popts...)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %s", desc, redact(err.Error()))
	}
	return &store{b: b, desc: desc, redact: redact, close: func() { b.Close(); pool.Close() }}, nil
}

func openSQLServer(ctx context.Context, t target) (*store, error) {
	cfg, err := msdsn.Parse(t.addr)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid SQL Server DSN: %s", t.source, redactWith(err.Error(), urlSecrets(t.addr)))
	}
	secrets := []string{cfg.Password}
	redact := func(s string) string { return redactWith(s, secrets) }
	desc := fmt.Sprintf("SQL Server at %s (database %q, user %q)", cfg.Host, cfg.Database, cfg.User)
	db, err := sql.Open("sqlserver", t.addr)
	if err == nil {
		if err = db.PingContext(ctx); err != nil {
			db.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %s", desc, redact(err.Error()))
	}
	db.SetMaxOpenConns(2)
	var sopts []sqlserver.Option
	if t.schema != "" || t.table != "" {
		sopts = append(sopts, sqlserver.WithTable(or(t.schema, sqlserver.DefaultSchema), or(t.table, sqlserver.DefaultTable)))
	}
	b, err := sqlserver.New(db, sopts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %s", desc, redact(err.Error()))
	}
	return &store{b: b, desc: desc, redact: redact, close: func() { b.Close(); db.Close() }}, nil
}

func openEtcd(ctx context.Context, t target) (*store, error) {
	var endpoints, secrets []string
	for _, e := range strings.Split(t.addr, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
			secrets = append(secrets, urlSecrets(e)...)
		}
	}
	redact := func(s string) string { return redactWith(s, secrets) }
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%s names no endpoint (give host:port or http://host:port, comma-separated)", t.source)
	}
	for _, e := range endpoints {
		if u, err := url.Parse(e); err == nil && u.User != nil {
			// clientv3 takes credentials apart from the endpoints.
			return nil, fmt.Errorf("%s: an endpoint carries user information; etcd credentials are not supported by this CLI yet", t.source)
		}
	}
	desc := "etcd at " + strings.Join(endpoints, ",")
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: t.timeout,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %s", desc, redact(err.Error()))
	}
	// The client dials lazily: a read proves the cluster answers.
	if _, err := cli.Get(ctx, "leasehold-cli-ping", clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("cannot reach %s: %s", desc, redact(err.Error()))
	}
	var eopts []etcd.Option
	if t.etcdPrefix != "" {
		eopts = append(eopts, etcd.WithKeyPrefix(t.etcdPrefix))
	}
	b, err := etcd.New(cli, eopts...)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("%s: %s", desc, redact(err.Error()))
	}
	return &store{b: b, desc: desc, redact: redact, close: func() { b.Close(); cli.Close() }}, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

const redacted = "xxxxx"

// redactWith replaces every secret in s, as written and URL-escaped, with
// xxxxx. Secrets shorter than 3 bytes are left alone: hiding them would
// garble every message, and the drivers never print passwords anyway.
func redactWith(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) < 3 {
			continue
		}
		for _, form := range []string{sec, url.QueryEscape(sec), url.PathEscape(sec), url.UserPassword("u", sec).String()[2:]} {
			s = strings.ReplaceAll(s, form, redacted)
		}
	}
	return s
}

// keywordPassword finds the password of a key=value connection string
// (libpq "password=x", ADO "Password=x;" or "pwd=x").
var keywordPassword = regexp.MustCompile(`(?i)(?:password|pwd)\s*=\s*('[^']*'|"[^"]*"|\{[^}]*\}|[^;\s]+)`)

// argSecrets returns what looks like a password in any of args, so that a
// message quoting an argument (a DSN given without its flag) hides it.
func argSecrets(args []string) []string {
	var out []string
	for _, a := range args {
		out = append(out, urlSecrets(a)...)
		for _, m := range keywordPassword.FindAllStringSubmatch(a, -1) {
			out = append(out, m[1], strings.Trim(m[1], `'"{}`))
		}
	}
	return out
}

// urlSecrets returns the password of dsn when it parses as a URL, and the
// value of every query parameter named like a password: what to hide in an
// error about a DSN that a driver could not parse.
func urlSecrets(dsn string) []string {
	u, err := url.Parse(dsn)
	if err != nil {
		// Not even a URL: hide everything after "user:" up to "@".
		if at := strings.LastIndexByte(dsn, '@'); at > 0 {
			if colon := strings.LastIndexByte(dsn[:at], ':'); colon >= 0 {
				return []string{dsn[colon+1 : at]}
			}
		}
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok {
		out = append(out, p)
	}
	for k, vs := range u.Query() {
		if k := strings.ToLower(k); strings.Contains(k, "password") || k == "pwd" || strings.Contains(k, "secret") {
			out = append(out, vs...)
		}
	}
	return out
}
