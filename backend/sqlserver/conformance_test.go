package sqlserver

import (
	"database/sql"
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs the backend conformance suite against the SQL Server
// of LEASEHOLD_SQLSERVER_DSN, on a table of its own (every subtest uses keys
// of its own). Skipped when the variable is unset: there is no SQL Server on
// the development and CI machines.
func TestConformance(t *testing.T) {
	_, db, n := newRealBackend(t)
	newBackend := func(t *testing.T) backend.Backend {
		b, err := New(db, WithTable(n.schema, n.table))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	o := realServerOptions(t, db)
	backendtest.RunWith(t, o, newBackend)
	leaseholdtest.RunWith(t, o, newBackend)
}

// TestConformanceWithReplica runs the suite with replica confirmation turned
// on, the primary standing in for its own replica, so that the confirmation
// query and its RowVersion comparison run against a real server.
func TestConformanceWithReplica(t *testing.T) {
	_, db, n := newRealBackend(t)
	newBackend := func(t *testing.T) backend.Backend {
		b, err := New(db, WithTable(n.schema, n.table), WithReplica(db))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	o := realServerOptions(t, db)
	backendtest.RunWith(t, o, newBackend)
	leaseholdtest.RunWith(t, o, newBackend)
}

// babelfishTimeScale stretches the suites' TTLs and waits on Babelfish for
// PostgreSQL, whose acquire batch takes tens of milliseconds (its T-SQL is
// interpreted) where SQL Server's takes one or two.
const babelfishTimeScale = 4

// realServerOptions adapts the suites to the server behind db.
func realServerOptions(t *testing.T, db *sql.DB) backendtest.Options {
	var babelfish sql.NullInt64
	if err := db.QueryRowContext(realCtx(t), "SELECT CAST(SERVERPROPERTY('Babelfish') AS INT);").Scan(&babelfish); err != nil {
		t.Fatalf("reading SERVERPROPERTY('Babelfish'): %v", err)
	}
	if babelfish.Int64 == 1 {
		t.Logf("Babelfish for PostgreSQL: the suites' times are stretched %d×", babelfishTimeScale)
		return backendtest.Options{TimeScale: babelfishTimeScale}
	}
	return backendtest.Options{}
}

// TestConformanceNamespaces: a SQL Server backend's namespace is its table;
// backends on two tables of one database share nothing. Skipped without
// LEASEHOLD_SQLSERVER_DSN, like TestConformance.
func TestConformanceNamespaces(t *testing.T) {
	backendtest.RunNamespaces(t, func(t *testing.T, _ string) backend.Backend {
		b, _, _ := newRealBackend(t)
		return b
	})
}
