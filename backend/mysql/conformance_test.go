package mysql

import (
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs both conformance suites against the test server, on
// a table of its own, and through a fault proxy to it for the rows that
// black-hole the link.
func TestConformance(t *testing.T) {
	e := newEnv(t)
	newBackend := func(t *testing.T) backend.Backend { return e.backend(t) }
	o := backendtest.Options{Blackhole: func(t *testing.T) (backend.Backend, func()) { return e.blackholed(t) }}
	backendtest.RunWith(t, o, newBackend)
	leaseholdtest.RunWith(t, o, newBackend)
}

// TestConformanceNamespaces: a MySQL backend's namespace is its table;
// backends on two tables of one database share nothing.
func TestConformanceNamespaces(t *testing.T) {
	backendtest.RunNamespaces(t, func(t *testing.T, _ string) backend.Backend { return newEnv(t).backend(t) })
}
