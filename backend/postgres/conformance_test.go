package postgres

import (
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs the shared conformance suite against the real server,
// on a table of its own (the suite's subtests use keys of their own).
func TestConformance(t *testing.T) {
	e := newEnv(t)
	newBackend := func(t *testing.T) backend.Backend { return e.backend(t) }
	backendtest.Run(t, newBackend)
	leaseholdtest.Run(t, newBackend)
}

// TestConformanceNamespaces: a PostgreSQL backend's namespace is its table;
// backends on two tables of one database share nothing.
func TestConformanceNamespaces(t *testing.T) {
	backendtest.RunNamespaces(t, func(t *testing.T, _ string) backend.Backend { return newEnv(t).backend(t) })
}
