package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/backend"
)

// countingConnector wraps the driver's connector and counts, per
// connection, the statements the server runs and the transactions the
// client begins. A call that the client runs as one statement in
// autocommit mode cannot keep a name's row lock while the server waits for
// the client's next round trip: the lock is taken and released inside that
// one statement.
type countingConnector struct {
	driver.Connector

	mu         sync.Mutex
	statements int
	begins     int
}

func (c *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: c}, nil
}

func (c *countingConnector) add(statements, begins int) {
	c.mu.Lock()
	c.statements += statements
	c.begins += begins
	c.mu.Unlock()
}

// take returns the counts so far and starts again from zero.
func (c *countingConnector) take() (statements, begins int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	statements, begins = c.statements, c.begins
	c.statements, c.begins = 0, 0
	return statements, begins
}

// countingConn forwards to the driver's connection. Preparing a statement
// is not counted (it runs nothing and takes no lock); executing one is.
type countingConn struct {
	driver.Conn
	c *countingConnector
}

func (cn *countingConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	cn.c.add(0, 1)
	return cn.Conn.(driver.ConnBeginTx).BeginTx(ctx, o)
}

func (cn *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	s, err := cn.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: s, c: cn.c}, nil
}

func (cn *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	r, err := cn.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
	if err != driver.ErrSkip {
		cn.c.add(1, 0)
	}
	return r, err
}

func (cn *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := cn.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
	if err != driver.ErrSkip {
		cn.c.add(1, 0)
	}
	return r, err
}

func (cn *countingConn) ResetSession(ctx context.Context) error {
	return cn.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (cn *countingConn) IsValid() bool { return cn.Conn.(driver.Validator).IsValid() }

type countingStmt struct {
	driver.Stmt
	c *countingConnector
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.add(1, 0)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.add(1, 0)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// TestCallsHoldNoLockAcrossRoundTrips: Acquire (exclusive and with a limit,
// granted, refused, queued and handed on), Release and Revoke each run as
// one statement in autocommit mode and begin no transaction of the client's,
// so that no name's row lock is held while the server waits for the client:
// a client paused mid-call (GC, a slow link) holds up no other caller of
// the name, and a departed waiter's clean-up release does not queue behind
// it.
func TestCallsHoldNoLockAcrossRoundTrips(t *testing.T) {
	e := newEnv(t)
	cfg, err := mysqldrv.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	inner, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingConnector{Connector: inner}
	db := sql.OpenDB(cc)
	t.Cleanup(func() { db.Close() })
	b, err := New(db, WithTable(e.schema, e.table), WithSweep(time.Hour, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The first Acquire checks the server's settings first.
	if _, err := b.Acquire(ctx, backend.AcquireRequest{Key: "warm", Owner: "o", Attempt: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	cc.take()

	once := func(what string, fn func() error) {
		t.Helper()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		statements, begins := cc.take()
		if statements != 1 || begins != 0 {
			t.Errorf("%s ran %d statements in %d transactions of the client's, want 1 statement and none", what, statements, begins)
		}
	}
	q := backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute, Poll: 1}
	acquire := func(key, owner string, limit int, want bool) func() error {
		return func() error {
			g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: owner, Attempt: owner, TTL: time.Minute, Limit: limit, Wait: true, Queue: q})
			if err == nil && g.Acquired != want {
				t.Errorf("Acquire(%s, %s) acquired = %v, want %v", key, owner, g.Acquired, want)
			}
			return err
		}
	}
	release := func(key, owner string) func() error {
		return func() error {
			return b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: owner, Attempt: owner})
		}
	}
	once("exclusive acquire", acquire("x", "a", 0, true))
	once("refused acquire that queues", acquire("x", "b", 0, false))
	once("release that hands on", release("x", "a"))
	once("acquire of a handed-on name", acquire("x", "b", 0, true))
	once("acquire with a limit", acquire("n", "a", 2, true))
	once("second acquire with a limit", acquire("n", "b", 2, true))
	once("refused acquire with a limit", acquire("n", "c", 2, false))
	once("revoke", func() error { _, _, err := b.Revoke(ctx, "n", 0); return err })
	once("release", release("n", "b"))
}
