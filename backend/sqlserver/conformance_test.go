package sqlserver

import (
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
	backendtest.Run(t, newBackend)
	leaseholdtest.Run(t, newBackend)
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
	backendtest.Run(t, newBackend)
	leaseholdtest.Run(t, newBackend)
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
