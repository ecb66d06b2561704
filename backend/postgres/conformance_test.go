package postgres

import (
	"net"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/internal/faultproxy"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs the shared conformance suite against the real server,
// on a table of its own (the suite's subtests use keys of their own), and
// through a fault proxy to it for the rows that black-hole the link.
func TestConformance(t *testing.T) {
	e := newEnv(t)
	newBackend := func(t *testing.T) backend.Backend { return e.backend(t) }
	o := backendtest.Options{Blackhole: e.blackholed}
	backendtest.RunWith(t, o, newBackend)
	leaseholdtest.RunWith(t, o, newBackend)
}

// blackholed is the conformance suites' Options.Blackhole: a backend on the
// env's table whose pool connects through a fault proxy to the server.
func (e *testEnv) blackholed(t *testing.T) (backend.Backend, func()) {
	cfg := e.pool.Config().ConnConfig
	p, err := faultproxy.New(net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	host, port, err := net.SplitHostPort(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, e.appName, func(c *pgxpool.Config) {
		c.ConnConfig.Host, c.ConnConfig.Port = host, uint16(n)
		c.ConnConfig.Fallbacks = nil
	})
	b, err := New(pool, WithTable(e.schema, e.table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Blackhole(false) // first: the pool closes its connections, and the backend
		_ = b.Close()
	})
	return b, func() { p.Blackhole(true) }
}

// TestConformanceNamespaces: a PostgreSQL backend's namespace is its table;
// backends on two tables of one database share nothing.
func TestConformanceNamespaces(t *testing.T) {
	backendtest.RunNamespaces(t, func(t *testing.T, _ string) backend.Backend { return newEnv(t).backend(t) })
}
