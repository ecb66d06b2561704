package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
)

// command is one subcommand.
type command struct {
	name, args, summary string
	// needsName: exactly one NAME argument; otherwise none.
	needsName bool
	// flags registers the command's own flags; the returned function runs
	// it once the store is open.
	flags func(fs *flag.FlagSet) func(ctx context.Context, a *app, s *store, o *opts) int
	// check validates the command's flags before any connection.
	check func() error
}

// opts are the flags every command has, and the NAME argument.
type opts struct {
	redisAddr, pgDSN, sqlDSN string
	mysqlDSN                 string
	etcdEndpoints            string
	redisPrefix, etcdPrefix  string
	schema, table            string
	keyPrefix                string
	timeout                  time.Duration
	json                     bool

	name string // NAME, for commands that take one
	key  string // keyPrefix + name
}

func (o *opts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.redisAddr, "redis", "", "Redis `ADDR`: host:port or redis://[user:password@]host:port[/db] (default $"+envRedis+")")
	fs.StringVar(&o.pgDSN, "postgres", "", "PostgreSQL `DSN` (default $"+envPostgres+")")
	fs.StringVar(&o.sqlDSN, "sqlserver", "", "SQL Server `DSN` (default $"+envSQLServer+")")
	fs.StringVar(&o.mysqlDSN, "mysql", "", "MySQL or MariaDB `DSN`: user[:password]@tcp(host:port)/ (default $"+envMySQL+")")
	fs.StringVar(&o.etcdEndpoints, "etcd", "", "etcd `ENDPOINTS`: host:port or http(s)://host:port, comma-separated (default $"+envEtcd+")")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", "", "the etcd backend's key `prefix`, as given to etcd.WithKeyPrefix (default \"leasehold/\")")
	fs.StringVar(&o.redisPrefix, "redis-prefix", "", "the Redis backend's key `prefix`, as given to redis.WithKeyPrefix (default \"leasehold:\")")
	fs.StringVar(&o.schema, "schema", "", "`schema` of the lease table (MySQL: its database), SQL stores only (default \"lease\", \"leasehold\" on MySQL)")
	fs.StringVar(&o.table, "table", "", "lease `table`, SQL stores only (default \"leases\" on PostgreSQL and MySQL, \"Leases\" on SQL Server)")
	fs.StringVar(&o.keyPrefix, "key-prefix", "", "the Manager's key `prefix` (leasehold.WithKeyPrefix): names are shown and given without it")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on connecting and on each store call")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of text")
}

// target selects the store: the one store flag given, else the one
// environment variable set. Anything else is a usage error.
func (o *opts) target(getenv func(string) string) (target, error) {
	type cand struct{ kind, addr, source string }
	var flags, envs []cand
	for _, c := range []cand{{"redis", o.redisAddr, "-redis"}, {"postgres", o.pgDSN, "-postgres"}, {"sqlserver", o.sqlDSN, "-sqlserver"}, {"mysql", o.mysqlDSN, "-mysql"}, {"etcd", o.etcdEndpoints, "-etcd"}} {
		if c.addr != "" {
			flags = append(flags, c)
		}
	}
	for _, c := range []cand{{"redis", getenv(envRedis), envRedis}, {"postgres", getenv(envPostgres), envPostgres}, {"sqlserver", getenv(envSQLServer), envSQLServer}, {"mysql", getenv(envMySQL), envMySQL}, {"etcd", getenv(envEtcd), envEtcd}} {
		if c.addr != "" {
			envs = append(envs, c)
		}
	}
	var chosen cand
	switch {
	case len(flags) > 1:
		return target{}, usagef("give one store, not %s and %s", flags[0].source, flags[1].source)
	case len(flags) == 1:
		chosen = flags[0]
	case len(envs) > 1:
		return target{}, usagef("no store flag, and several store variables are set (%s, %s): choose one with -redis, -postgres, -sqlserver, -mysql or -etcd", envs[0].source, envs[1].source)
	case len(envs) == 1:
		chosen = envs[0]
	default:
		return target{}, usagef("no store: give -redis ADDR, -postgres DSN, -sqlserver DSN, -mysql DSN or -etcd ENDPOINTS (or set %s, %s, %s, %s or %s)",
			envRedis, envPostgres, envSQLServer, envMySQL, envEtcd)
	}
	if (chosen.kind == "redis" || chosen.kind == "etcd") && (o.schema != "" || o.table != "") {
		return target{}, usagef("-schema and -table apply to -postgres, -sqlserver and -mysql, not -%s", chosen.kind)
	}
	if chosen.kind != "etcd" && o.etcdPrefix != "" {
		return target{}, usagef("-etcd-prefix applies to -etcd only")
	}
	if chosen.kind != "redis" && o.redisPrefix != "" {
		return target{}, usagef("-redis-prefix applies to -redis only")
	}
	if o.timeout <= 0 {
		return target{}, usagef("-timeout must be positive, got %v", o.timeout)
	}
	return target{kind: chosen.kind, addr: chosen.addr, source: chosen.source,
		redisPrefix: o.redisPrefix, etcdPrefix: o.etcdPrefix, schema: o.schema, table: o.table, timeout: o.timeout}, nil
}

// lookup returns a fresh command (its flags are its own) named name.
func lookup(name string) *command {
	for _, c := range []*command{listCommand(), inspectCommand(), releaseCommand(), watchCommand()} {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run runs the command line args (without the program name) and returns the
// exit code.
func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, "leasehold: no command\n\n"+synopsis)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && lookup(args[1]) != nil {
			return a.run(ctx, []string{args[1], "-h"})
		}
		printHelp(a.stdout, nil, nil)
		return exitOK
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(a.stderr, "leasehold: unknown command %s (commands: list, inspect, release, watch; run 'leasehold -h')\n", showArg(args[0]))
		return exitUsage
	}
	fs := flag.NewFlagSet("leasehold "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, help on stdout
	var o opts
	o.register(fs)
	runCmd := c.flags(fs)
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		printHelp(a.stdout, c, fs)
		return exitOK
	}
	if err == nil {
		err = a.checkArgs(c, &o, pos)
	}
	var t target
	if err == nil {
		t, err = o.target(a.getenv)
	}
	if err != nil {
		// The flag package's messages may quote an argument: one that may
		// hold a password (a DSN given without its flag) is hidden whole.
		fmt.Fprintf(a.stderr, "leasehold %s: %s\nRun 'leasehold %s -h' for usage.\n", c.name, hideArgs(err.Error(), args), c.name)
		return exitUsage
	}
	s, err := a.open(ctx, t)
	var ue *usageError
	switch {
	case errors.As(err, &ue): // an address that cannot be used: refused before any connection
		fmt.Fprintf(a.stderr, "leasehold %s: %s\nRun 'leasehold %s -h' for usage.\n", c.name, err, c.name)
		return exitUsage
	case err != nil:
		fmt.Fprintf(a.stderr, "leasehold %s: %s\n", c.name, err)
		return exitFailure
	}
	defer s.close()
	return runCmd(ctx, a, s, &o)
}

func (a *app) checkArgs(c *command, o *opts, pos []string) error {
	switch {
	case c.needsName && len(pos) == 0:
		return usagef("missing NAME")
	case c.needsName && len(pos) > 1:
		shown := make([]string, len(pos))
		for i, p := range pos {
			shown[i] = showArg(p)
		}
		return usagef("one NAME only, got %d arguments (%s)", len(pos), strings.Join(shown, " "))
	case !c.needsName && len(pos) > 0:
		return usagef("unexpected argument %s (%s takes no NAME)", showArg(pos[0]), c.name)
	}
	if c.needsName {
		o.name, o.key = pos[0], o.keyPrefix+pos[0]
		if err := backend.CheckText("name", o.key); err != nil {
			return usagef("bad NAME %s: %s", showArg(pos[0]), strings.TrimPrefix(err.Error(), backend.ErrInvalidRequest.Error()+": "))
		}
	}
	if c.check != nil {
		return c.check()
	}
	return nil
}

// failf reports a failure (exit 1), its secrets hidden.
func (a *app) failf(s *store, cmd string, format string, args ...any) int {
	fmt.Fprintf(a.stderr, "leasehold %s: %s\n", cmd, s.redact(fmt.Sprintf(format, args...)))
	return exitFailure
}

// fail reports a store call's error (exit 1), with a hint when the lease
// table is missing.
func (a *app) fail(s *store, cmd string, err error) int {
	if missingTable(err) {
		return a.failf(s, cmd, "%v\n(no lease table there: check -schema and -table, or create it with the backend's EnsureSchema)", err)
	}
	return a.failf(s, cmd, "%v", err)
}

// missingTable reports whether err says the lease table does not exist.
func missingTable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42P01" || pe.Code == "3F000" // undefined table, undefined schema
	}
	var me mssql.Error
	if errors.As(err, &me) {
		return me.Number == 208 // invalid object name
	}
	var my *mysqldrv.MySQLError
	return errors.As(err, &my) && (my.Number == 1146 || my.Number == 1049) // no such table, unknown database
}

// callCtx bounds one store call by -timeout.
func callCtx(ctx context.Context, o *opts) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, o.timeout)
}

// width is the terminal's width for tables: stdout's when it is one, else
// $COLUMNS, else 0 (unknown).
func (a *app) width() int {
	if w := ttyWidth(a.stdout); w > 0 {
		return w
	}
	if n, err := strconv.Atoi(a.getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 0
}
