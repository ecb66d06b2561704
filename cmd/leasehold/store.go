package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/microsoft/go-mssqldb/msdsn"
	goredis "github.com/redis/go-redis/v9"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/etcd"
	"github.com/leasehold/leasehold/backend/mysql"
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
	envMySQL     = "LEASEHOLD_MYSQL_DSN"
	envEtcd      = "LEASEHOLD_ETCD_ENDPOINTS"
)

// target is the store selected by the command line: kind ("redis",
// "postgres", "sqlserver", "mysql", "etcd") and address, DSN or endpoints, which may hold a password
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
	desc string // where it is, for messages: the kind and host:port, nothing else
	// redact hides the connection's password in any message: defence in
	// depth, since no message is built from the address, the DSN or the
	// endpoints, and the drivers leave passwords out of their errors.
	redact func(string) string
	close  func()
}

// Passwords are kept out of every message by construction: an address, DSN or
// endpoint is parsed first, and only the host:port it names goes into a
// message; a parse failure is reported without the parser's text (which
// quotes the input, escaped in ways no redaction can list: a %q form, a
// password split by an unescaped '/' or '@'). Driver errors after a
// successful parse name hosts, users and databases, never passwords; they
// are passed through redact all the same.

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
	case "mysql":
		return openMySQL(ctx, t)
	case "etcd":
		return openEtcd(ctx, t)
	}
	return nil, fmt.Errorf("unknown store kind %q", t.kind)
}

func openRedis(ctx context.Context, t target) (*store, error) {
	var opts *goredis.Options
	switch {
	case strings.Contains(t.addr, "://"):
		if err := checkURLShape(t); err != nil {
			return nil, err
		}
		o, err := goredis.ParseURL(t.addr)
		if err != nil {
			return nil, usagef("%s is not a valid Redis address or URL (want host:port or redis://[user:password@]host:port[/db], special characters of the password %%-escaped; the URL is not shown)", t.source)
		}
		opts = o
	case strings.Contains(t.addr, "@"):
		// user:password@host: not shown, and only a URL carries a password.
		return nil, usagef("%s has an @ but no redis:// scheme: give a password as redis://[user:password@]host:port", t.source)
	default:
		if _, _, err := net.SplitHostPort(t.addr); err != nil {
			return nil, usagef("%s is not host:port or a redis:// URL (the address is not shown)", t.source)
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
	if err := checkURLShape(t); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(t.addr)
	if err != nil {
		return nil, usagef("%s is not a valid PostgreSQL DSN (want a postgres:// URL, special characters of the password %%-escaped, or key=value pairs; the DSN is not shown)", t.source)
	}
	secrets := []string{cfg.ConnConfig.Password}
	redact := func(s string) string { return redactWith(s, secrets) }
	desc := "PostgreSQL at " + net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
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
		return nil, fmt.Errorf("cannot reach %s: %s", desc, redact(connectCause(err).Error()))
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

// connectCause is the cause of a failed PostgreSQL connection without pgx's
// summary of the configuration (which names the user and the database): the
// message names the host already.
func connectCause(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		return ce.Unwrap()
	}
	return err
}

func openSQLServer(ctx context.Context, t target) (*store, error) {
	if err := checkURLShape(t); err != nil {
		return nil, err
	}
	cfg, err := msdsn.Parse(t.addr)
	if err != nil {
		return nil, usagef("%s is not a valid SQL Server DSN (want a sqlserver:// URL or key=value pairs; the DSN is not shown)", t.source)
	}
	secrets := []string{cfg.Password}
	redact := func(s string) string { return redactWith(s, secrets) }
	host := cfg.Host
	if cfg.Instance != "" {
		host += `\` + cfg.Instance
	}
	if cfg.Port != 0 {
		host = net.JoinHostPort(host, strconv.FormatUint(cfg.Port, 10))
	}
	desc := "SQL Server at " + host
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

func openMySQL(ctx context.Context, t target) (*store, error) {
	cfg, err := mysqldrv.ParseDSN(t.addr)
	if err != nil {
		return nil, usagef("%s is not a valid MySQL DSN (want user[:password]@tcp(host:port)/[database][?param=value]; the DSN is not shown)", t.source)
	}
	secrets := []string{cfg.Passwd}
	redact := func(s string) string { return redactWith(s, secrets) }
	desc := "MySQL at " + cfg.Addr
	// The driver would log connection trouble to stderr itself; the error
	// returned says it all.
	cfg.Logger = mysqldrv.Logger(discardLogger{})
	cfg.Timeout = t.timeout
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return nil, usagef("%s is not a usable MySQL DSN (the DSN is not shown)", t.source)
	}
	db := sql.OpenDB(conn)
	if err = db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot reach %s: %s", desc, redact(err.Error()))
	}
	db.SetMaxOpenConns(2)
	var mopts []mysql.Option
	if t.schema != "" || t.table != "" {
		mopts = append(mopts, mysql.WithTable(or(t.schema, mysql.DefaultSchema), or(t.table, mysql.DefaultTable)))
	}
	b, err := mysql.New(db, mopts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %s", desc, redact(err.Error()))
	}
	return &store{b: b, desc: desc, redact: redact, close: func() { b.Close(); db.Close() }}, nil
}

// discardLogger drops the MySQL driver's own log lines.
type discardLogger struct{}

func (discardLogger) Print(...any) {}

func openEtcd(ctx context.Context, t target) (*store, error) {
	var endpoints, hosts []string
	for i, e := range strings.Split(t.addr, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		host, err := etcdHost(e)
		if err != nil {
			return nil, usagef("%s, endpoint %d: %v", t.source, i+1, err)
		}
		endpoints, hosts = append(endpoints, e), append(hosts, host)
	}
	if len(endpoints) == 0 {
		return nil, usagef("%s names no endpoint (give host:port or http://host:port, comma-separated)", t.source)
	}
	desc := "etcd at " + strings.Join(hosts, ",")
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: t.timeout,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %v", desc, err)
	}
	// The client dials lazily: a read proves the cluster answers.
	if _, err := cli.Get(ctx, "leasehold-cli-ping", clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("cannot reach %s: %v", desc, err)
	}
	var eopts []etcd.Option
	if t.etcdPrefix != "" {
		eopts = append(eopts, etcd.WithKeyPrefix(t.etcdPrefix))
	}
	b, err := etcd.New(cli, eopts...)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("%s: %v", desc, err)
	}
	return &store{b: b, desc: desc, redact: func(s string) string { return s }, close: func() { b.Close(); cli.Close() }}, nil
}

// checkURLShape refuses an address in URL form whose @ is not in its
// authority, or that has more than one: the mark of a password with an
// unescaped @, /, ? or #, which the parsers split where nobody can tell, so
// that part of the password would be taken for the host, the port or the
// database and named in messages.
func checkURLShape(t target) error {
	_, rest, ok := strings.Cut(t.addr, "://")
	if !ok {
		return nil
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if n := strings.Count(rest, "@"); n > 1 || (n == 1 && !strings.Contains(authority, "@")) {
		return usagef("%s has an @ outside its user:password@host part (not shown): %%-escape the special characters of the password (@ is %%40, / is %%2F)", t.source)
	}
	return nil
}

// etcdHost checks an etcd endpoint, host:port or http(s)://host:port, and
// returns its host:port. It refuses anything else, credentials above all
// (clientv3 takes them apart from the endpoints, and an endpoint that
// carries them would be dialled and named in errors), without quoting it.
func etcdHost(e string) (string, error) {
	if strings.Contains(e, "@") {
		return "", errors.New("it carries user information (not shown); etcd credentials are not supported by this CLI yet")
	}
	hostPort := e
	if scheme, rest, ok := strings.Cut(e, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return "", errors.New("its scheme is not http:// or https:// (the endpoint is not shown)")
		}
		hostPort = strings.TrimSuffix(rest, "/")
	}
	if h, p, err := net.SplitHostPort(hostPort); err != nil || h == "" || p == "" || strings.ContainsAny(hostPort, "/?#") {
		return "", errors.New("it is not host:port or http(s)://host:port (the endpoint is not shown)")
	}
	return hostPort, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

const redacted = "xxxxx"

// redactWith replaces every secret in s, as written, quoted (%q), shown on
// one line and URL-escaped, with xxxxx. Secrets shorter than 3 bytes are left
// alone: hiding them would garble every message, and no message is built
// from a password anyway.
func redactWith(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) < 3 {
			continue
		}
		q := strconv.Quote(sec)
		for _, form := range []string{sec, q[1 : len(q)-1], oneLine(sec), url.QueryEscape(sec), url.PathEscape(sec), url.UserPassword("u", sec).String()[2:]} {
			s = strings.ReplaceAll(s, form, redacted)
		}
	}
	return s
}

// mayHoldSecret reports whether a command-line argument could be an
// address, DSN or endpoint with a password in it: anything with an @
// (user:password@host) or an = (key=value pairs). Messages never show such
// an argument.
func mayHoldSecret(arg string) bool { return strings.ContainsAny(arg, "@=") }

// showArg is arg as a message may show it: quoted on one line, or a
// placeholder when it may hold a secret.
func showArg(arg string) string {
	if mayHoldSecret(arg) {
		return "(an argument with @ or =, not shown)"
	}
	return strconv.Quote(oneLine(arg))
}

// hideArgs hides in msg, a message of the flag package, every argument (or
// the value of a -flag=value) that may hold a secret, as the flag package
// writes one: as given or quoted (%q).
func hideArgs(msg string, args []string) string {
	for _, a := range args {
		if name, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "-") {
			a = value
		}
		if !mayHoldSecret(a) {
			continue
		}
		msg = strings.ReplaceAll(msg, strconv.Quote(a), "(not shown)")
		msg = strings.ReplaceAll(msg, a, "(not shown)")
	}
	return msg
}
