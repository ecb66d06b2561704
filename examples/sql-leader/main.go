// Command sql-leader elects one leader for a job across processes, through a
// lease row in PostgreSQL (or SQL Server when -sqlserver is given). Start it
// in several terminals: one process leads and works, printing its fencing
// token; the others wait, and one of them takes over at once when the leader
// steps down (after -term) or stops, or by the TTL when it dies.
//
//	go -C examples run ./sql-leader -term 5s
//
// Connection strings come from -postgres / -sqlserver or from
// LEASEHOLD_POSTGRES_DSN / LEASEHOLD_SQLSERVER_DSN; they are never printed.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/microsoft/go-mssqldb" // the "sqlserver" database/sql driver

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/postgres"
	"github.com/leasehold/leasehold/backend/sqlserver"
	"github.com/leasehold/leasehold/election"
)

type config struct {
	postgresDSN  string
	sqlserverDSN string
	schema       string
	job          string
	owner        string
	ttl          time.Duration
	work         time.Duration // one unit of work
	term         time.Duration // step down after this long as leader (0: never)
	terms        int           // exit after leading this many terms (0: never)
}

func main() {
	host, _ := os.Hostname()
	c := config{}
	flag.StringVar(&c.postgresDSN, "postgres", envOr("LEASEHOLD_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL connection string")
	flag.StringVar(&c.sqlserverDSN, "sqlserver", os.Getenv("LEASEHOLD_SQLSERVER_DSN"), "SQL Server connection string (used instead of PostgreSQL when set)")
	flag.StringVar(&c.schema, "schema", postgres.DefaultSchema, "schema of the lease table")
	flag.StringVar(&c.job, "job", "nightly-report", "name of the job (the lease)")
	flag.StringVar(&c.owner, "owner", fmt.Sprintf("%s:%d", host, os.Getpid()), "this process's identity")
	flag.DurationVar(&c.ttl, "ttl", 5*time.Second, "lease TTL: how long a crashed leader blocks the job")
	flag.DurationVar(&c.work, "work", time.Second, "duration of one unit of work")
	flag.DurationVar(&c.term, "term", 0, "step down after leading this long (0: lead until stopped)")
	flag.IntVar(&c.terms, "terms", 0, "exit after leading this many terms (0: run until interrupted)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "sql-leader:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// run connects, makes sure the lease table exists, and campaigns until ctx
// ends or c.terms terms were led.
func run(ctx context.Context, c config, out io.Writer) error {
	b, where, closeDB, err := open(ctx, c)
	if err != nil {
		return err
	}
	defer closeDB()
	m, err := leasehold.New(b, leasehold.WithOwner(c.owner))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(cctx) // releases the lease at once if we lead
	}()
	fmt.Fprintf(out, "%s: campaigning for %q on %s\n", c.owner, c.job, where)
	fmt.Fprintf(out, "%s: start more copies in other terminals: one leads, the others wait and take over when it steps down or stops\n", c.owner)

	// One election.Run per term: ending a term's context resigns (the lease
	// is released once the callback has returned, and a waiting process
	// takes over).
	for led := 0; c.terms == 0 || led < c.terms; {
		term, endTerm := context.WithCancel(ctx)
		err := election.Run(term, m, c.job, election.Callbacks{
			OnStartedLeading: func(lctx context.Context) {
				led++
				l, _ := leasehold.LeaseFrom(lctx)
				fmt.Fprintf(out, "%s: LEADER of %q with fencing token %d\n", c.owner, c.job, l.Token())
				lead(lctx, l, c, out)
				switch cause := context.Cause(l.Context()); {
				case errors.Is(cause, leasehold.ErrLost):
					fmt.Fprintf(out, "%s: LOST leadership (token %d): %v\n", c.owner, l.Token(), cause)
				default:
					fmt.Fprintf(out, "%s: stepped down (token %d)\n", c.owner, l.Token())
				}
				endTerm() // resign now that the term is over (a no-op if the lease was lost)
			},
		}, leasehold.WithTTL(c.ttl))
		endTerm()
		if err != nil || ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		// Rest one unit of work before campaigning again, so that a waiting
		// process (woken by the release notification) takes over.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.work):
		}
	}
	return nil
}

// lead does units of work under the leadership's context until the term
// ends or leadership ends. Real work would pass l.Token() to the resource it
// writes, which rejects writes carrying an older token.
func lead(ctx context.Context, l *leasehold.Lease, c config, out io.Writer) {
	var termEnd <-chan time.Time
	if c.term > 0 {
		t := time.NewTimer(c.term)
		defer t.Stop()
		termEnd = t.C
	}
	tick := time.NewTicker(c.work)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-termEnd:
			return
		case <-tick.C:
			fmt.Fprintf(out, "%s: working as leader, token %d\n", c.owner, l.Token())
		}
	}
}

// open returns the backend and a printable description of where it is (host
// and database only: never the password).
func open(ctx context.Context, c config) (backend.Backend, string, func(), error) {
	if c.sqlserverDSN != "" {
		db, err := sql.Open("sqlserver", c.sqlserverDSN)
		if err != nil {
			return nil, "", nil, fmt.Errorf("sql server connection string: %w", err)
		}
		if err := sqlserver.EnsureSchema(ctx, db, c.schema, "Leases"); err != nil {
			db.Close()
			return nil, "", nil, err
		}
		b, err := sqlserver.New(db, sqlserver.WithTable(c.schema, "Leases"))
		if err != nil {
			db.Close()
			return nil, "", nil, err
		}
		return b, "SQL Server", func() { db.Close() }, nil
	}
	cfg, err := pgxpool.ParseConfig(c.postgresDSN)
	if err != nil {
		return nil, "", nil, errors.New("invalid PostgreSQL connection string") // its text may hold a password
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", nil, err
	}
	if err := postgres.EnsureSchema(ctx, pool, c.schema, postgres.DefaultTable); err != nil {
		pool.Close()
		return nil, "", nil, err
	}
	b, err := postgres.New(pool, postgres.WithTable(c.schema, postgres.DefaultTable))
	if err != nil {
		pool.Close()
		return nil, "", nil, err
	}
	where := fmt.Sprintf("PostgreSQL %s:%d/%s, table %s.%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, c.schema, postgres.DefaultTable)
	return b, where, pool.Close, nil
}
