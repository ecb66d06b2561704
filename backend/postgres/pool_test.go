package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Managers sharing one pool: each holds two connections of its own, taken
// out of the pool (its release watch and its hand-off watch, each LISTENing
// on a hijacked connection), which do not count against MaxConns. With the
// pool's own connections all in use, the server sees MaxConns + 2N
// connections: what the package doc and docs/backends/postgres.md tell users to size
// max_connections for.
func TestManagersSharingAPoolHoldTwoConnectionsEach(t *testing.T) {
	e := newEnv(t)
	const maxConns, managers = 2, 3
	app := randomName("lh_pool_") // the env's own pool is not counted
	pool := newPool(t, app, func(c *pgxpool.Config) { c.MaxConns = maxConns })
	for range managers {
		b, err := New(pool, WithTable(e.schema, e.table))
		if err != nil {
			t.Fatal(err)
		}
		newManager(t, b, "m-"+newAttempt())
	}
	// Only the server can tell when every watch has LISTENed.
	if err := pollServer(ctxT(t), "every watch to LISTEN", func() (bool, error) {
		return connections(t, e, app, "LISTEN %") == 2*managers, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Take every connection the pool may have: the watches' are not among them.
	for range maxConns {
		c, err := pool.Acquire(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	if got, want := connections(t, e, app, "%"), maxConns+2*managers; got != want {
		t.Errorf("%d Managers on a pool of MaxConns %d hold %d server connections, want MaxConns + 2 per Manager = %d",
			managers, maxConns, got, want)
	}
	if s := pool.Stat(); s.TotalConns() != maxConns || s.AcquiredConns() != maxConns {
		t.Errorf("the pool counts %d connections (%d acquired), want its MaxConns %d", s.TotalConns(), s.AcquiredConns(), maxConns)
	}
}

// connections counts the server connections of the application name app
// whose last statement is like query.
func connections(t *testing.T, e *testEnv, app, query string) int {
	t.Helper()
	var n int
	err := e.admin.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE $2",
		app, query).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
