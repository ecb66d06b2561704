package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
	lhsqlserver "github.com/leasehold/leasehold/backend/sqlserver"
)

// newSQLServerBackend is a SQL Server backend on LEASEHOLD_SQLSERVER_DSN (a
// Microsoft SQL Server, or Babelfish for PostgreSQL), on a table of its own,
// dropped afterwards. Skipped without the variable: no SQL Server runs here
// by default.
func newSQLServerBackend(b *testing.B) *lhsqlserver.Backend {
	b.Helper()
	dsn := os.Getenv("LEASEHOLD_SQLSERVER_DSN")
	if dsn == "" {
		b.Skip("LEASEHOLD_SQLSERVER_DSN is not set")
	}
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(32) // as the PostgreSQL benchmarks' pool
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		b.Fatalf("LEASEHOLD_SQLSERVER_DSN: %v", err)
	}
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	const schema = "lh_bench"
	table := "leases_" + hex.EncodeToString(r)
	b.Cleanup(func() {
		for _, t := range []string{table, table + "_Queue"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS [" + schema + "].[" + t + "]")
		}
		_, _ = db.Exec("DROP SEQUENCE IF EXISTS [" + schema + "].[" + table + "_Token]")
		db.Close()
	})
	if err := lhsqlserver.EnsureSchema(ctx, db, schema, table); err != nil {
		b.Fatal(err)
	}
	be, err := lhsqlserver.New(db, lhsqlserver.WithTable(schema, table))
	if err != nil {
		b.Fatal(err)
	}
	return be
}

// BenchmarkSQLServerAcquireRelease is BenchmarkPostgresAcquireRelease's
// leasehold and backend rows on SQL Server: one acquire+release of one of
// 1,000 names, through a Manager and through the backend alone.
func BenchmarkSQLServerAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 16} {
		gs := "goroutines=" + strconv.Itoa(g)
		b.Run("leasehold/"+gs, func(b *testing.B) {
			benchLeasehold(b, newSQLServerBackend(b), g)
		})
		b.Run("backend/"+gs, func(b *testing.B) {
			be := newSQLServerBackend(b)
			ctx := context.Background()
			runOps(b, g, func(name string) error {
				gr, err := be.Acquire(ctx, backend.AcquireRequest{Key: name, Owner: "bench", Attempt: "bench", TTL: 30 * time.Second})
				if err != nil || !gr.Acquired {
					return err
				}
				return be.Release(ctx, backend.ReleaseRequest{Key: name, Owner: "bench", Attempt: "bench", Token: gr.Token})
			})
		})
	}
}

// BenchmarkRenewBatch renews 1,000 held leases in one RenewBatch call (one
// op), on SQL Server (LEASEHOLD_SQLSERVER_DSN) and on PostgreSQL.
func BenchmarkRenewBatch(b *testing.B) {
	b.Run("sqlserver", func(b *testing.B) { benchRenewBatch(b, newSQLServerBackend(b)) })
	b.Run("postgres", func(b *testing.B) { benchRenewBatch(b, newPGBench(b).backend(b)) })
}

func benchRenewBatch(b *testing.B, be backend.Backend) {
	const n = 1000
	ctx := context.Background()
	rs := make([]backend.RenewRequest, n)
	for i := range rs {
		key := "job-" + strconv.Itoa(i)
		g, err := be.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "bench", Attempt: "bench", TTL: time.Minute})
		if err != nil || !g.Acquired {
			b.Fatalf("acquire %s: %+v, %v", key, g, err)
		}
		rs[i] = backend.RenewRequest{Key: key, Owner: "bench", Attempt: "bench", Token: g.Token, TTL: time.Minute}
	}
	b.ResetTimer()
	for range b.N {
		res, err := be.RenewBatch(ctx, rs)
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				b.Fatalf("renewal %d: %v", i, r.Err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "µs/renewal")
}
