package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// countingDriver is a database whose every query blocks until gate is
// closed (or its context ends) and that counts the queries in flight.
type countingDriver struct {
	gate    chan struct{}
	entered chan struct{} // one value per query that started
	mu      sync.Mutex
	now     int
	max     int
}

func (d *countingDriver) Connect(context.Context) (driver.Conn, error) { return countingConn{d}, nil }
func (d *countingDriver) Driver() driver.Driver                        { return nil }

func (d *countingDriver) peak() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.max
}

type countingConn struct{ d *countingDriver }

func (c countingConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not supported") }
func (c countingConn) Close() error                        { return nil }
func (c countingConn) Begin() (driver.Tx, error)           { return nil, errors.New("not supported") }
func (c countingConn) CheckNamedValue(*driver.NamedValue) error {
	return nil
}

func (c countingConn) QueryContext(ctx context.Context, _ string, _ []driver.NamedValue) (driver.Rows, error) {
	d := c.d
	d.mu.Lock()
	d.now++
	d.max = max(d.max, d.now)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.now--
		d.mu.Unlock()
	}()
	d.entered <- struct{}{}
	select {
	case <-d.gate:
		return noRows{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// noRows is an empty result of the inspect query's columns.
type noRows struct{}

func (noRows) Columns() []string         { return holdingColumns }
func (noRows) Close() error              { return nil }
func (noRows) Next([]driver.Value) error { return io.EOF }

// TestCallsInFlightBounded: the backend never has more calls in flight than
// its bound (the pool's MaxOpenConnections, DefaultMaxCalls for an unlimited
// pool, or WithMaxCalls); a call beyond it waits for a slot within its own
// context, without reaching the database.
func TestCallsInFlightBounded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		poolMax int
		opts    []Option
		bound   int
	}{
		{"unlimited pool", 0, nil, DefaultMaxCalls},
		{"pool of 4", 4, nil, 4},
		{"unlimited pool, WithMaxCalls(3)", 0, []Option{WithMaxCalls(3)}, 3},
		{"pool of 2, WithMaxCalls(5)", 2, []Option{WithMaxCalls(5)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const extra = 40
			d := &countingDriver{gate: make(chan struct{}), entered: make(chan struct{}, tc.bound+extra+1)}
			db := sql.OpenDB(d)
			defer db.Close()
			db.SetMaxOpenConns(tc.poolMax)
			b, err := New(db, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var wg sync.WaitGroup
			defer wg.Wait()
			inspect := func(ctx context.Context) error { _, _, err := b.Inspect(ctx, "k"); return err }
			for range tc.bound {
				wg.Go(func() {
					if err := inspect(context.Background()); err != nil {
						t.Error(err)
					}
				})
			}
			for range tc.bound {
				select {
				case <-d.entered:
				case <-time.After(10 * time.Second):
					close(d.gate)
					t.Fatal("the first calls did not reach the database")
				}
			}
			// One call more: it waits for a slot until its context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			err = inspect(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || d.peak() > tc.bound {
				t.Errorf("a call beyond the bound = %v with %d calls in flight; want it to wait (bound %d)", err, d.peak(), tc.bound)
			}
			for range extra {
				wg.Go(func() {
					if err := inspect(context.Background()); err != nil {
						t.Error(err)
					}
				})
			}
			close(d.gate)
			wg.Wait()
			if got := d.peak(); got > tc.bound {
				t.Errorf("%d calls in flight, bound %d", got, tc.bound)
			}
		})
	}
}

func TestWithMaxCallsRefusesZero(t *testing.T) {
	db, _ := newMockDB(t)
	for _, n := range []int{0, -1} {
		if _, err := New(db, WithMaxCalls(n)); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New(WithMaxCalls(%d)) = %v, want ErrInvalidOption", n, err)
		}
	}
}
