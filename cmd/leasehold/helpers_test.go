package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/etcd"
	"github.com/leasehold/leasehold/backend/mysql"
	"github.com/leasehold/leasehold/backend/postgres"
	"github.com/leasehold/leasehold/backend/redis"
	"github.com/leasehold/leasehold/backend/sqlserver"
	"github.com/leasehold/leasehold/internal/poll"
)

// bin is the leasehold binary built by TestMain.
var bin string

// mainRun builds the binary before the tests and removes it after.
type mainRun struct{ m *testing.M }

func (r mainRun) Run() int {
	dir, err := os.MkdirTemp("", "leasehold-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "leasehold")
	args := []string{"build", "-o", bin}
	if raceEnabled { // the binary's goroutines are checked as the tests' are
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, ".")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	defer stopEtcd()
	return r.m.Run()
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestMain(m *testing.M) { goleak.VerifyTestMain(mainRun{m}) }

// storeVars are the variables that select a store: removed from the
// environment of every run unless a test sets them.
var storeVars = []string{envRedis, envPostgres, envSQLServer, envMySQL, envEtcd}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the binary with args, stdin as its input and env added to a
// clean environment (no store variables), and waits for it to exit.
func run(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv(env)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run leasehold %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	t.Logf("leasehold %s\n-> exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return result{stdout.String(), stderr.String(), code}
}

func childEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, v := range storeVars {
			keep = keep && k != v
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func requireServices() bool { return os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" }

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if requireServices() {
		t.Fatalf("%s (LEASEHOLD_REQUIRE_SERVICES=1)", msg)
	}
	t.Skipf("%s; set LEASEHOLD_REQUIRE_SERVICES=1 to fail instead of skipping", msg)
}

// storeEnv is one real store, private to a test: the backend a Manager uses
// and the flags that point the binary at the same leases.
type storeEnv struct {
	name  string
	b     backend.Backend
	flags []string
	// listeners counts the connections subscribed to the store's release
	// notifications (nil: the store has none).
	listeners func(ctx context.Context) (int, error)
}

// storeCase opens a store for one test.
type storeCase struct {
	name string
	open func(t *testing.T) *storeEnv
}

var storeCases = []storeCase{{"postgres", postgresEnv}, {"redis", redisEnv}, {"sqlserver", sqlserverEnv}, {"mysql", mysqlEnv}, {"etcd", etcdEnv}}

// forEachStore runs f as a subtest on every real store.
func forEachStore(t *testing.T, f func(t *testing.T, e *storeEnv)) {
	for _, c := range storeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f(t, c.open(t))
		})
	}
}

func postgresDSN() string {
	if dsn := os.Getenv(envPostgres); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// postgresEnv makes a lease table in a schema of its own, dropped at cleanup.
func postgresEnv(t *testing.T) *storeEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, postgresDSN())
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		unavailable(t, "PostgreSQL is not reachable (set %s): %v", envPostgres, err)
	}
	t.Cleanup(pool.Close)
	schema := "lh_cli_" + randomHex(6)
	if err := postgres.EnsureSchema(ctx, pool, schema, postgres.DefaultTable); err != nil {
		t.Fatalf("EnsureSchema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA "`+schema+`" CASCADE`); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	b, err := postgres.New(pool, postgres.WithTable(schema, postgres.DefaultTable))
	if err != nil {
		t.Fatalf("postgres.New: %v", err)
	}
	listeners := func(ctx context.Context) (int, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = $1`,
			`LISTEN "`+b.Channel()+`"`).Scan(&n)
		return n, err
	}
	return &storeEnv{name: "postgres", b: b, flags: []string{"-postgres", postgresDSN(), "-schema", schema}, listeners: listeners}
}

func redisAddr() string {
	if a := os.Getenv(envRedis); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// redisEnv uses a backend key prefix of its own, so that its leases are the
// test's only.
func redisEnv(t *testing.T) *storeEnv {
	t.Helper()
	client := goredis.NewClient(&goredis.Options{Addr: redisAddr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		unavailable(t, "no Redis at %s (set %s): %v", redisAddr(), envRedis, err)
	}
	prefix := "lh-cli-" + randomHex(6) + ":"
	b, err := redis.New(client, redis.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	listeners := func(ctx context.Context) (int, error) {
		n, err := client.PubSubNumSub(ctx, b.Channel()).Result()
		return int(n[b.Channel()]), err
	}
	return &storeEnv{name: "redis", b: b, flags: []string{"-redis", redisAddr(), "-redis-prefix", prefix}, listeners: listeners}
}

// sqlserverEnv makes a lease table in a schema of its own on the SQL Server
// of LEASEHOLD_SQLSERVER_DSN. There is none on the development and CI
// machines: an unset variable always skips (as in backend/sqlserver).
func sqlserverEnv(t *testing.T) *storeEnv {
	t.Helper()
	dsn := os.Getenv(envSQLServer)
	if dsn == "" {
		t.Skip(envSQLServer + " is not set: skipping the SQL Server runs")
	}
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		t.Fatalf("%s: %v", envSQLServer, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		unavailable(t, "SQL Server of %s is not reachable: %v", envSQLServer, err)
	}
	schema := "lh_cli_" + randomHex(6)
	if err := sqlserver.EnsureSchema(ctx, db, schema, sqlserver.DefaultTable); err != nil {
		t.Fatalf("EnsureSchema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, stmt := range []string{
			"DROP TABLE [" + schema + "].[" + sqlserver.DefaultTable + "_Queue]",
			"DROP TABLE [" + schema + "].[" + sqlserver.DefaultTable + "]",
			"DROP SEQUENCE [" + schema + "].[" + sqlserver.DefaultTable + "_FencingToken]",
			"DROP SCHEMA [" + schema + "]",
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	b, err := sqlserver.New(db, sqlserver.WithTable(schema, sqlserver.DefaultTable))
	if err != nil {
		t.Fatalf("sqlserver.New: %v", err)
	}
	return &storeEnv{name: "sqlserver", b: b, flags: []string{"-sqlserver", dsn, "-schema", schema}}
}

func mysqlDSN() string {
	if dsn := os.Getenv(envMySQL); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// mysqlEnv makes a lease table of its own in the DSN's database, dropped at
// cleanup.
func mysqlEnv(t *testing.T) *storeEnv {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(mysqlDSN())
	if err != nil {
		t.Fatalf("%s: %v", envMySQL, err)
	}
	db, err := sql.Open("mysql", mysqlDSN())
	if err != nil {
		t.Fatalf("%s: %v", envMySQL, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		unavailable(t, "MySQL is not reachable at %s (set %s; .ci/ensure-mariadb starts it): %v", cfg.Addr, envMySQL, err)
	}
	schema := or(cfg.DBName, "test")
	table := "lh_cli_" + randomHex(6)
	if err := mysql.EnsureSchema(ctx, db, schema, table); err != nil {
		t.Fatalf("EnsureSchema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, tb := range []string{table, table + "_holds", table + "_queue"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE `"+schema+"`.`"+tb+"`"); err != nil {
				t.Errorf("drop table %s: %v", tb, err)
			}
		}
		for _, p := range []string{table + "_acq", table + "_rel", table + "_rev", table + "_swp"} {
			if _, err := db.ExecContext(ctx, "DROP PROCEDURE IF EXISTS `"+schema+"`.`"+p+"`"); err != nil {
				t.Errorf("drop procedure %s: %v", p, err)
			}
		}
	})
	b, err := mysql.New(db, mysql.WithTable(schema, table))
	if err != nil {
		t.Fatalf("mysql.New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &storeEnv{name: "mysql", b: b, flags: []string{"-mysql", mysqlDSN(), "-schema", schema, "-table", table}}
}

// The etcd server the tests share (each test uses a key prefix of its own):
// the installed etcd binary, on free loopback ports, started by the first
// test that needs it and killed after the last.
var (
	etcdOnce     sync.Once
	etcdProc     *exec.Cmd
	etcdDir      string
	etcdEndpoint string
	etcdErr      error
)

func startEtcd() {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		etcdErr = fmt.Errorf("no etcd server binary on PATH (run .ci/ensure-etcd): %w", err)
		return
	}
	if etcdDir, err = os.MkdirTemp("", "leasehold-cli-etcd-"); err != nil {
		etcdErr = err
		return
	}
	client, peer := "http://"+freeAddr(), "http://"+freeAddr()
	etcdProc = exec.Command(bin, "--name", "cli", "--data-dir", etcdDir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "cli="+peer, "--log-level", "error")
	dieWithTests(etcdProc)
	if etcdErr = etcdProc.Start(); etcdErr != nil {
		etcdProc = nil
		return
	}
	etcdEndpoint = client
}

func stopEtcd() {
	if etcdProc != nil {
		_ = etcdProc.Process.Kill()
		_ = etcdProc.Wait()
	}
	if etcdDir != "" {
		os.RemoveAll(etcdDir)
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}

// etcdEnv uses a backend key prefix of its own on the shared etcd server.
func etcdEnv(t *testing.T) *storeEnv {
	t.Helper()
	etcdOnce.Do(startEtcd)
	if etcdErr != nil {
		unavailable(t, "etcd: %v", etcdErr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	poll.Until(t, "etcd at "+etcdEndpoint+" answering (it may still be starting)", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "ping")
		return err == nil
	})
	prefix := "lh-cli-" + randomHex(6) + "/"
	b, err := etcd.New(cli, etcd.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatalf("etcd.New: %v", err)
	}
	return &storeEnv{name: "etcd", b: b, flags: []string{"-etcd", etcdEndpoint, "-etcd-prefix", prefix}}
}

// newManager returns a Manager on e's store, closed at cleanup.
func newManager(t *testing.T, e *storeEnv, owner string) *leasehold.Manager {
	t.Helper()
	m, err := leasehold.New(e.b, leasehold.WithOwner(owner))
	if err != nil {
		t.Fatalf("leasehold.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}

// args joins a command, e's flags and more arguments.
func (e *storeEnv) args(cmd string, more ...string) []string {
	return append(append([]string{cmd}, e.flags...), more...)
}

// lineSink collects the lines a running process writes, for tests that wait
// for a line (never for a while).
type lineSink struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	changed chan struct{}
}

func newLineSink() *lineSink { return &lineSink{changed: make(chan struct{}, 1)} }

func (s *lineSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.lines = append(s.lines, string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

// all returns the lines so far, and the unfinished last line (a prompt) if
// there is one.
func (s *lineSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.lines...)
	if len(s.partial) > 0 {
		out = append(out, string(s.partial))
	}
	return out
}

// waitFor returns the first line that satisfies ok, waiting up to a minute
// (a bound for a stuck process, not a timing assumption).
func (s *lineSink) waitFor(t *testing.T, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		for _, l := range s.all() {
			if ok(l) {
				return l
			}
		}
		select {
		case <-s.changed:
		case <-deadline.C:
			t.Fatalf("no line with %s within a minute; got:\n%s", what, strings.Join(s.all(), "\n"))
		}
	}
}
