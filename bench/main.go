package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/faultproxy"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-worker" {
		// A worker ignores ^C: the parent decides when it ends.
		signal.Ignore(syscall.SIGINT)
		if err := runWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(2)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK     = 0
	exitUnsafe = 1 // leasehold (or the unsafe lock) showed overlapping holdings
	exitError  = 2 // bad flags, unreachable service, failed run
)

// cliFlags are the parsed command line.
type cliFlags struct {
	base       runConfig
	locks      []string
	procs      []int
	format     string
	reportDir  string
	repeat     int // runs of each configuration
	chaos      []string
	inProcess  bool
	quiet      bool
	replot     string
	scale      int           // > 0: scale mode with this many leases
	cpuProfile string        // scale mode: where to write a CPU profile of the hold phase
	renew      time.Duration // scale mode: renewal period (0: TTL/3)
	scaleTTL   bool          // -ttl was given
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// parseFlags reads the command line; defaults run leasehold on the memory
// backend in one worker process.
func parseFlags(args []string, stderr io.Writer) (*cliFlags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs)
	f := &cliFlags{}
	c := &f.base
	fs.StringVar(&c.Backend, "backend", backendMemory, "store: memory, redis, postgres, sqlserver or mysql")
	fs.StringVar(&c.RedisAddr, "redis", envOr("LEASEHOLD_REDIS_ADDR", "127.0.0.1:6379"), "Redis address; $LEASEHOLD_REDIS_ADDR sets the default")
	// DSN defaults are resolved after parsing, so that -h never prints a
	// password taken from the environment.
	fs.StringVar(&c.PostgresDSN, "postgres", "", "PostgreSQL DSN (default $LEASEHOLD_POSTGRES_DSN, else the local test database)")
	fs.StringVar(&c.SQLServerDSN, "sqlserver", "", "SQL Server DSN (default $LEASEHOLD_SQLSERVER_DSN)")
	fs.StringVar(&c.MySQLDSN, "mysql", "", "MySQL or MariaDB DSN, user[:password]@tcp(host:port)/ (default $LEASEHOLD_MYSQL_DSN, else the local test server)")
	locks := fs.String("locks", "", "comma-separated contenders: leasehold, redislock, redsync (redis), pglock-protocol (postgres), unsafe (default: leasehold and every peer the backend has)")
	procs := fs.String("procs", "1", "worker processes; a comma-separated list sweeps the number of contenders")
	fs.IntVar(&c.Goroutines, "goroutines", 4, "contending goroutines per process")
	fs.IntVar(&c.Keys, "keys", 1, "number of lease names")
	fs.StringVar(&c.Dist, "dist", "hot", "which name each acquisition goes for: hot (name 0 only), uniform or zipf")
	fs.Float64Var(&c.ZipfS, "zipf-s", 1.2, "zipf exponent (> 1)")
	fs.DurationVar(&c.Hold, "hold", time.Millisecond, "how long a holder keeps a name")
	fs.DurationVar(&c.Think, "think", 0, "pause after each release before the next acquire (0: a contender asks again at once, and may win against the waiters)")
	fs.DurationVar(&c.TTL, "ttl", 5*time.Second, "lease TTL")
	wait := fs.String("wait", "forever", `how long one acquire waits: "forever" (until the run ends) or a duration (then it counts as not acquired and tries again)`)
	fs.DurationVar(&c.PeerPoll, "peer-poll", 0, "retry interval of the polling peers (default 0: each library's documented setting: redislock 100ms, redsync 50-250ms, pglock the lease duration)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "length of each run")
	fs.IntVar(&c.Limit, "limit", 1, "most holders of a name at once: above 1 a semaphore (leasehold's WithLimit), without the peers, which have none")
	fs.StringVar(&f.format, "format", "table", "output: table, json or csv")
	fs.StringVar(&f.reportDir, "report", "", "directory for results.json and the charts (none by default)")
	fs.IntVar(&f.repeat, "repeat", 1, "run each configuration this many times; the table and charts show the median and the min–max spread")
	chaos := fs.String("chaos", "", "comma-separated chaos during each run: restart (redis: the bench's own server, started empty; mysql: the bench's own MariaDB, crashed and recovered), cut (connections), pause (SIGSTOP a holder for 1.5×TTL), kill (SIGKILL a process waiting for the hot name, holding none; the others go on)")
	fs.BoolVar(&f.inProcess, "inprocess", false, "run the workers as goroutines of this process instead of processes (no pause or kill chaos)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
	fs.StringVar(&f.replot, "replot", "", "run nothing: print the results of a -report directory and draw its charts again, from its results.json")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "scale mode: write a CPU profile of leasehold's hold phase to this file")
	fs.IntVar(&f.scale, "scale", 0, "scale mode: acquire this many leases in one process and keep them alive for -duration (TTL -ttl, default 3s; renewed every -renew), with redislock's one refresh per lock alongside on redis")
	fs.DurationVar(&f.renew, "renew", 0, "scale mode: renewal period (default TTL/3)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	f.scaleTTL = set["ttl"]
	if c.PostgresDSN == "" {
		c.PostgresDSN = envOr("LEASEHOLD_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	if c.SQLServerDSN == "" {
		c.SQLServerDSN = os.Getenv("LEASEHOLD_SQLSERVER_DSN")
	}
	if c.MySQLDSN == "" {
		c.MySQLDSN = envOr("LEASEHOLD_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test")
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", errConfig, fs.Arg(0))
	}
	switch *wait {
	case "forever":
		c.Wait = waitForever
	default:
		d, err := time.ParseDuration(*wait)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: -wait %q: want forever or a positive duration such as 500ms", errConfig, *wait)
		}
		c.Wait = d
	}
	for _, p := range splitList(*procs) {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: -procs %q: want a number of processes (at least 1) or a comma-separated list of them", errConfig, *procs)
		}
		f.procs = append(f.procs, n)
	}
	f.locks = splitList(*locks)
	if len(f.locks) == 0 {
		f.locks = []string{lockLeasehold}
		if c.Limit <= 1 {
			// Above 1 none of them has a semaphore: the run says so.
			f.locks = append(f.locks, peersOf(c.Backend)...)
		}
	}
	f.chaos = splitList(*chaos)
	for _, a := range f.chaos {
		if a != chaosRestart && a != chaosCut && a != chaosPause && a != chaosKill {
			return nil, fmt.Errorf("%w: -chaos %q: want restart, cut, pause or kill", errConfig, a)
		}
	}
	switch f.format {
	case "table", "json", "csv":
	default:
		return nil, fmt.Errorf("%w: -format %q: want table, json or csv", errConfig, f.format)
	}
	if f.repeat < 1 {
		return nil, fmt.Errorf("%w: -repeat %d: at least 1", errConfig, f.repeat)
	}
	if c.Limit < 1 {
		return nil, fmt.Errorf("%w: -limit %d: want 1 (an exclusive lock) to %d", errConfig, c.Limit, leasehold.MaxLimit)
	}
	if f.scale < 0 {
		return nil, fmt.Errorf("%w: -scale %d: negative", errConfig, f.scale)
	}
	if err := checkCombinations(f, set); err != nil {
		return nil, err
	}
	return f, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// run is the CLI: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		if errors.Is(err, errConfig) {
			fmt.Fprintln(stderr, "bench: -h lists the flags")
		}
		return exitError
	}
	if f.scale > 0 {
		return runScaleCLI(ctx, f, stdout, stderr)
	}
	var results []*runResult
	if f.replot != "" {
		results, err = replot(f.replot)
	} else {
		if note := leftOutNote(f.base.Backend, f.base.Limit); note != "" {
			fmt.Fprintln(stderr, "bench:", note)
		}
		results, err = runAll(ctx, f, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitError
	}
	if err := writeResults(stdout, f.format, results); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitError
	}
	if f.reportDir != "" {
		if err := writeReport(f.reportDir, results); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return exitError
		}
	}
	for _, r := range results {
		if r.failed() {
			what := "overlapping holdings"
			if r.limit() > 1 {
				what = fmt.Sprintf("holdings beyond the limit of %d", r.limit())
			}
			fmt.Fprintf(stderr, "bench: %v: %s with %d contenders had %d %s\n", errUnsafe, r.Lock, r.Contenders, r.Safety.Overlaps, what)
			return exitUnsafe
		}
	}
	return exitOK
}

// runAll runs every lock at every number of processes, -repeat times each,
// chaos included. The repetitions of one number of processes take turns
// between the locks (leasehold, peer, leasehold, peer...), so that a change
// in the machine's load weighs on every lock alike.
func runAll(ctx context.Context, f *cliFlags, stderr io.Writer) ([]*runResult, error) {
	o := runOptions{launcher: execLauncher{}}
	if f.inProcess {
		o.launcher = inProcessLauncher{}
	}
	if !f.quiet {
		o.progress, o.progressTTY = stderr, isTerminal(stderr)
	}
	base := f.base
	if len(f.chaos) > 0 {
		plan, cleanup, err := setUpChaos(ctx, f, &base)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		o.chaos = plan
	}
	var out []*runResult
	for _, procs := range f.procs {
		for rep := 1; rep <= f.repeat; rep++ {
			for _, lock := range f.locks {
				cfg := base
				cfg.Lock, cfg.Procs, cfg.Rep = lock, procs, rep
				cfg.Prefix = fmt.Sprintf("run%d-%s-%d:", time.Now().UnixNano(), lock, procs)
				cfg.Seed = uint64(time.Now().UnixNano())
				r, err := runOne(ctx, cfg, o)
				if err != nil {
					return nil, fmt.Errorf("%s, %d processes, run %d: %w", lock, procs, rep, err)
				}
				out = append(out, r)
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
			}
		}
	}
	return out, nil
}

// setUpChaos prepares what the chaos actions act on: on redis the bench's own
// server behind a TCP proxy (the contenders dial the proxy), on PostgreSQL a
// pool to terminate the bench's own connections, on MySQL the bench's own
// MariaDB server (crashed and started again on its data) behind a TCP proxy.
// Leasehold on a restarted Redis gets WithRestartGrace(TTL), the
// setting its documentation asks for when the server has no persistence.
func setUpChaos(ctx context.Context, f *cliFlags, c *runConfig) (*chaosPlan, func(), error) {
	plan := &chaosPlan{actions: f.chaos, down: 500 * time.Millisecond}
	if !slices.Contains(f.chaos, chaosRestart) && !slices.Contains(f.chaos, chaosCut) {
		// pause and kill act on the workers alone: the backend is the
		// run's own.
		return plan, func() {}, nil
	}
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	switch c.Backend {
	case backendRedis:
		r, err := startOwnRedis(ctx)
		if err != nil {
			return nil, nil, err
		}
		cleanups = append(cleanups, r.stop)
		// A young server grants no free name during the restart grace: let
		// the fresh one come of age first, so that only the chaos restart
		// is subject to it.
		if err := r.waitOlderThan(ctx, c.TTL); err != nil {
			cleanup()
			return nil, nil, err
		}
		plan.redis = r
		p, err := faultproxy.New(r.addr())
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, p.Close)
		plan.proxy = p
		c.RedisAddr = p.Addr()
		c.RestartGrace = c.TTL
	case backendPostgres:
		pool, err := postgresPool(ctx, runConfig{PostgresDSN: c.PostgresDSN, Goroutines: 1})
		if err != nil {
			return nil, nil, err
		}
		cleanups = append(cleanups, pool.Close)
		plan.pg = pool
	case backendMySQL:
		m, err := startOwnMySQL(ctx)
		if err != nil {
			return nil, nil, err
		}
		cleanups = append(cleanups, m.stop)
		plan.mysql = m
		p, err := faultproxy.New(m.addr())
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, p.Close)
		plan.proxy = p
		c.MySQLDSN = "root@tcp(" + p.Addr() + ")/"
	}
	return plan, cleanup, nil
}
