package sqlserver

import (
	"context"
	"database/sql"
	"net"
	"os"
	"sync"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/internal/faultproxy"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs the backend conformance suite against the SQL Server
// of LEASEHOLD_SQLSERVER_DSN, on a table of its own (every subtest uses keys
// of its own), and through a fault proxy to it for the rows that black-hole
// the link. Skipped when the
// variable is unset: there is no SQL Server on the development and CI
// machines.
func TestConformance(t *testing.T) {
	_, db, n := newRealBackend(t)
	newBackend := func(t *testing.T) backend.Backend {
		b, err := New(db, WithTable(n.schema, n.table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	o := realServerOptions(t, db)
	o.Blackhole = func(t *testing.T) (backend.Backend, func()) {
		db, blackhole := blackholedDB(t)
		b, err := New(db, WithTable(n.schema, n.table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b, blackhole
	}
	backendtest.RunWith(t, o, newBackend)
	leaseholdtest.RunWith(t, o, newBackend)
}

// blackholedDB opens the server of LEASEHOLD_SQLSERVER_DSN (as realServerDB
// does) through proxiedDB.
func blackholedDB(t *testing.T) (*sql.DB, func()) {
	realServerDB(t) // skips, or fails, as every real-server test does
	return proxiedDB(t, os.Getenv("LEASEHOLD_SQLSERVER_DSN"))
}

// proxiedDB opens dsn with every connection dialled through a fault proxy
// of its own, and returns it with the function that black-holes them all,
// those dialled later included. The link is repaired, and the pool closed,
// when the test ends.
func proxiedDB(t *testing.T, dsn string) (*sql.DB, func()) {
	conn, err := mssql.NewConnector(dsn)
	if err != nil {
		t.Fatalf("invalid DSN %s: %v", redactDSN(dsn), err)
	}
	d := &proxyDialer{proxies: map[string]*faultproxy.Proxy{}}
	conn.Dialer = d
	db := sql.OpenDB(conn)
	t.Cleanup(func() {
		d.blackhole(false)
		_ = db.Close()
		d.close()
	})
	return db, func() { d.blackhole(true) }
}

// proxyDialer dials every server address through a fault proxy to it.
type proxyDialer struct {
	mu      sync.Mutex
	proxies map[string]*faultproxy.Proxy // by the server's address
	holed   bool
	closed  bool
}

func (d *proxyDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	p := d.proxies[addr]
	if p == nil && !d.closed {
		var err error
		if p, err = faultproxy.New(addr); err != nil {
			d.mu.Unlock()
			return nil, err
		}
		p.Blackhole(d.holed)
		d.proxies[addr] = p
	}
	d.mu.Unlock()
	if p == nil {
		return nil, net.ErrClosed
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, p.Addr())
}

func (d *proxyDialer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, p := range d.proxies {
		p.Close()
	}
}

func (d *proxyDialer) blackhole(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holed = on
	for _, p := range d.proxies {
		p.Blackhole(on)
	}
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
		t.Cleanup(func() { b.Close() })
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
