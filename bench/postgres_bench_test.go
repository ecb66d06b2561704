package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	lhpostgres "github.com/leasehold/leasehold/backend/postgres"
)

// pgBench is one benchmark's PostgreSQL: a pool (the same settings for every
// contestant) and a schema of its own, dropped afterwards.
type pgBench struct {
	pool   *pgxpool.Pool
	schema string
}

func newPGBench(b *testing.B) *pgBench {
	b.Helper()
	dsn := os.Getenv("LEASEHOLD_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatalf("LEASEHOLD_POSTGRES_DSN: %v", err)
	}
	cfg.MaxConns = 32
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			b.Fatalf("no PostgreSQL at %s: %v", cfg.ConnConfig.Host, err)
		}
		b.Skipf("no PostgreSQL at %s: %v; set LEASEHOLD_REQUIRE_SERVICES=1 to fail instead", cfg.ConnConfig.Host, err)
	}
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	p := &pgBench{pool: pool, schema: "lh_bench_" + hex.EncodeToString(r)}
	b.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{p.schema}.Sanitize()+" CASCADE")
		pool.Close()
	})
	return p
}

func (p *pgBench) backend(b *testing.B) *lhpostgres.Backend {
	b.Helper()
	ctx := context.Background()
	if err := lhpostgres.EnsureSchema(ctx, p.pool, p.schema, "leases"); err != nil {
		b.Fatal(err)
	}
	be, err := lhpostgres.New(p.pool, lhpostgres.WithTable(p.schema, "leases"))
	if err != nil {
		b.Fatal(err)
	}
	return be
}

// BenchmarkPostgresAcquireRelease compares, against the same PostgreSQL and
// with the same pool settings, one acquire+release of one of 1,000 names
// through a leasehold Manager, through the PostgreSQL backend alone (no
// engine), and through the protocol of cirello.io/pglock (see pglockLike). A
// name that is busy (another goroutine has it) counts as done everywhere.
func BenchmarkPostgresAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 16} {
		gs := "goroutines=" + strconv.Itoa(g)
		b.Run("leasehold/"+gs, func(b *testing.B) {
			benchLeasehold(b, newPGBench(b).backend(b), g)
		})
		b.Run("backend/"+gs, func(b *testing.B) {
			be := newPGBench(b).backend(b)
			ctx := context.Background()
			runOps(b, g, func(name string) error {
				gr, err := be.Acquire(ctx, backend.AcquireRequest{Key: name, Owner: "bench", Attempt: "bench", TTL: 30 * time.Second})
				if err != nil || !gr.Acquired {
					return err
				}
				return be.Release(ctx, backend.ReleaseRequest{Key: name, Owner: "bench", Attempt: "bench", Token: gr.Token})
			})
		})
		b.Run("pglock-protocol/"+gs, func(b *testing.B) {
			pl := newPGLockLike(b, newPGBench(b))
			ctx := context.Background()
			runOps(b, g, func(name string) error {
				rvn, ok, err := pl.acquire(ctx, name)
				if err != nil || !ok {
					return err
				}
				return pl.release(ctx, name, rvn)
			})
		})
	}
}

// BenchmarkPostgresHandOff measures, for one hot name, the time from the
// holder's Release call to the grant of the next owner, who is already
// waiting (WithWait) in another Manager: NOTIFY wakes it instead of the
// holder's expiry. Reported as handoff-p50-ms and handoff-p99-ms.
func BenchmarkPostgresHandOff(b *testing.B) {
	be := newPGBench(b).backend(b)
	w := &busySignal{Backend: be, waiter: "waiter", busy: make(chan struct{}, 1)}
	holder, err := leasehold.New(w, leasehold.WithOwner("holder"))
	if err != nil {
		b.Fatal(err)
	}
	defer holder.Close(context.Background())
	waiter, err := leasehold.New(w, leasehold.WithOwner("waiter"))
	if err != nil {
		b.Fatal(err)
	}
	defer waiter.Close(context.Background())
	ctx := context.Background()
	type granted struct {
		l   *leasehold.Lease
		at  time.Time
		err error
	}
	var handoffs []time.Duration
	b.ResetTimer()
	for range b.N {
		l1, err := holder.Acquire(ctx, "hot", leasehold.WithTTL(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan granted, 1)
		go func() {
			l, err := waiter.Acquire(ctx, "hot", leasehold.WithWait(10*time.Second))
			done <- granted{l, time.Now(), err}
		}()
		<-w.busy // the waiter has been told the name is busy: it waits now
		start := time.Now()
		if err := l1.Release(ctx); err != nil {
			b.Fatal(err)
		}
		g := <-done
		if g.err != nil {
			b.Fatal(g.err)
		}
		handoffs = append(handoffs, g.at.Sub(start))
		if err := g.l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(handoffs)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(handoffs[len(handoffs)/2]), "handoff-p50-ms")
	b.ReportMetric(ms(handoffs[len(handoffs)*99/100]), "handoff-p99-ms")
}

// busySignal passes everything through to the PostgreSQL backend (its
// release watch included) and signals when the waiter's acquire was answered
// "busy".
type busySignal struct {
	*lhpostgres.Backend
	waiter string
	busy   chan struct{}
}

func (s *busySignal) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	g, err := s.Backend.Acquire(ctx, r)
	if err == nil && !g.Acquired && r.Owner == s.waiter {
		select {
		case s.busy <- struct{}{}:
		default:
		}
	}
	return g, err
}

// pglockLike sends the statements that cirello.io/pglock sends for one
// acquire and one release (the module is not served by the module proxy
// here, so it cannot be imported): acquire is a SERIALIZABLE transaction of an
// upsert that writes a fresh random record version number where the row is
// free, then SELECT ... FOR UPDATE to learn whether that number won, then
// COMMIT; release is a SERIALIZABLE transaction that sets the number to NULL
// where it is still ours. Serialization failures are retried, as pglock
// does. It runs on pgx with the same pool as leasehold, which makes it faster
// than pglock itself (database/sql and lib/pq), never slower; pglock's
// heartbeat goroutine per lock is left out too.
type pglockLike struct {
	pool  *pgxpool.Pool
	table string
}

func newPGLockLike(b *testing.B, p *pgBench) *pglockLike {
	b.Helper()
	t := pgx.Identifier{p.schema, "locks"}.Sanitize()
	ctx := context.Background()
	for _, stmt := range []string{
		"CREATE SCHEMA " + pgx.Identifier{p.schema}.Sanitize(),
		"CREATE TABLE " + t + " (name character varying(255) PRIMARY KEY, record_version_number character varying(255), data bytea)",
	} {
		if _, err := p.pool.Exec(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	return &pglockLike{pool: p.pool, table: t}
}

func (p *pglockLike) acquire(ctx context.Context, name string) (rvn string, ok bool, err error) {
	r := make([]byte, 16)
	_, _ = rand.Read(r)
	rvn = hex.EncodeToString(r)
	for {
		ok, err = p.tx(ctx, func(tx pgx.Tx) (bool, error) {
			if _, err := tx.Exec(ctx, `INSERT INTO `+p.table+` (name, record_version_number, data) VALUES ($1, $2, NULL)
				ON CONFLICT (name) DO UPDATE SET record_version_number = $2
				WHERE `+p.table+`.record_version_number IS NULL`, name, rvn); err != nil {
				return false, err
			}
			var actual string
			if err := tx.QueryRow(ctx, `SELECT record_version_number FROM `+p.table+` WHERE name = $1 FOR UPDATE`, name).Scan(&actual); err != nil {
				return false, err
			}
			return actual == rvn, nil
		})
		if !serializationFailure(err) {
			return rvn, ok, err
		}
	}
}

func (p *pglockLike) release(ctx context.Context, name, rvn string) error {
	for {
		_, err := p.tx(ctx, func(tx pgx.Tx) (bool, error) {
			_, err := tx.Exec(ctx, `UPDATE `+p.table+` SET record_version_number = NULL WHERE name = $1 AND record_version_number = $2`, name, rvn)
			return true, err
		})
		if !serializationFailure(err) {
			return err
		}
	}
}

// tx runs fn in a SERIALIZABLE transaction; it commits only when fn reports
// true (a lost acquire rolls back, as pglock's does by not committing).
func (p *pglockLike) tx(ctx context.Context, fn func(pgx.Tx) (bool, error)) (bool, error) {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	ok, err := fn(tx)
	if err != nil || !ok {
		return false, err
	}
	return true, tx.Commit(ctx)
}

func serializationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40001"
}
