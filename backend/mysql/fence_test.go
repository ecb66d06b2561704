package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/fencetest"
)

// fenceEnv is a fence table and a data table of their own in the test
// database, dropped at cleanup.
type fenceEnv struct {
	db    *sql.DB
	table FenceTable
	data  string // quoted data table: resource -> value
}

func newFenceEnv(t *testing.T) *fenceEnv {
	t.Helper()
	db := openDB(t)
	cfg, _ := mysqldrv.ParseDSN(testDSN())
	schema := cfg.DBName
	if schema == "" {
		schema = "test"
	}
	e := &fenceEnv{db: db, table: FenceTable{Schema: schema, Table: randomName("lh_fence_")}}
	e.data = "`" + schema + "`.`" + e.table.Table + "_data`"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureFenceSchema(ctx, db, e.table.Schema, e.table.Table); err != nil {
		t.Fatalf("EnsureFenceSchema: %v", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+e.data+" (resource VARBINARY(512) PRIMARY KEY, value VARBINARY(200) NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, tb := range []string{e.table.quoted(), e.data} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+tb); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	return e
}

// Write is a caller's transaction: the fence, then the write.
func (e *fenceEnv) Write(ctx context.Context, resource string, token uint64, value string) error {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := e.table.Fence(ctx, tx, resource, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+e.data+" VALUES (?, ?) ON DUPLICATE KEY UPDATE value = ?", resource, value, value); err != nil {
		return err
	}
	return tx.Commit()
}

func (e *fenceEnv) Read(ctx context.Context, resource string) (string, error) {
	var v string
	err := e.db.QueryRowContext(ctx, "SELECT value FROM "+e.data+" WHERE resource = ?", resource).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func TestFenceConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Guard { return newFenceEnv(t) })
}

func TestFenceStoreConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Guard {
		e := newFenceEnv(t)
		return fencetest.StoreGuard(FenceStore(e.db, e.table))
	})
}

// TestFenceHoldsTheNewerHolderBack checks the serialisation the guard
// promises: while an older holder's transaction has passed the fence and not
// yet committed, a newer holder's Fence waits on the row lock; the older
// writes commit, then the newer holder's land after them.
func TestFenceHoldsTheNewerHolderBack(t *testing.T) {
	e := newFenceEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txA, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback()
	if err := e.table.Fence(ctx, txA, "r", 1); err != nil {
		t.Fatal(err)
	}

	txB, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer txB.Rollback()
	done := make(chan error, 1)
	go func() {
		if err := e.table.Fence(ctx, txB, "r", 2); err != nil {
			done <- err
			return
		}
		if _, err := txB.ExecContext(ctx, "INSERT INTO "+e.data+" VALUES ('r', 'B') ON DUPLICATE KEY UPDATE value = 'B'"); err != nil {
			done <- err
			return
		}
		done <- txB.Commit()
	}()
	// B's Fence waits on A's row lock: it must not return while A's
	// transaction is open.
	select {
	case err := <-done:
		t.Fatalf("B's write did not wait for A's transaction: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := txA.ExecContext(ctx, "INSERT INTO "+e.data+" VALUES ('r', 'A')"); err != nil {
		t.Fatal(err)
	}
	if err := txA.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("B's write: %v", err)
	}
	if v, _ := e.Read(ctx, "r"); v != "B" {
		t.Fatalf("value %q, want B's", v)
	}
}

// TestFenceSeesPastTheCallersSnapshot checks that a transaction that read
// the fence table before a newer holder committed is still refused: the
// guard's reads lock, so they see the latest row, not the snapshot.
func TestFenceSeesPastTheCallersSnapshot(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	if err := e.Write(ctx, "r", 1, "A"); err != nil {
		t.Fatal(err)
	}
	tx, err := e.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var seen uint64
	if err := tx.QueryRowContext(ctx, "SELECT token FROM "+e.table.quoted()+" WHERE resource = 'r'").Scan(&seen); err != nil {
		t.Fatal(err)
	}
	if err := e.Write(ctx, "r", 2, "B"); err != nil {
		t.Fatal(err)
	}
	var se *leasehold.StaleTokenError
	if err := e.table.Fence(ctx, tx, "r", 1); !errors.As(err, &se) || se.Highest != 2 {
		t.Fatalf("Fence with token 1 after 2, in a snapshot from before 2: %v, want a StaleTokenError naming 2", err)
	}
}

func TestFenceSchemaIsIdempotentAndChecked(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	if err := EnsureFenceSchema(ctx, e.db, e.table.Schema, e.table.Table); err != nil {
		t.Fatalf("second EnsureFenceSchema: %v", err)
	}
	// The data table is in the way of a fence table of that name.
	err := EnsureFenceSchema(ctx, e.db, e.table.Schema, e.table.Table+"_data")
	if !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("EnsureFenceSchema over the data table: %v, want ErrSchemaMismatch", err)
	}
	for _, name := range []string{"", "a-b", "a`b", strings.Repeat("x", 65)} {
		if err := EnsureFenceSchema(ctx, e.db, e.table.Schema, name); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("table %q: %v, want ErrInvalidIdentifier", name, err)
		}
		if s := FenceCreateScript(e.table.Schema, name); !strings.Contains(s, "SIGNAL SQLSTATE") || strings.Contains(s, "CREATE") {
			t.Errorf("FenceCreateScript of table %q: %q", name, s)
		}
	}
}

func TestFenceCreateScriptMakesAWorkingTable(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	other := FenceTable{Schema: e.table.Schema, Table: e.table.Table + "_script"}
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Cleanup(func() { _, _ = e.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+other.quoted()) })
	for stmt := range strings.SplitSeq(FenceCreateScript(other.Schema, other.Table), ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("FenceCreateScript statement %q: %v", stmt, err)
		}
	}
	if err := checkFenceShape(ctx, e.db, other); err != nil {
		t.Fatal(err)
	}
	s := FenceStore(e.db, other)
	if err := s.Check(ctx, "r", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx, "r", 1); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("token 1 after 2: %v, want ErrStaleToken", err)
	}
}

// TestFenceTakesEveryToken checks the whole uint64 range: the column is
// BIGINT UNSIGNED, like the tokens the backend issues.
func TestFenceTakesEveryToken(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	s := FenceStore(e.db, e.table)
	if err := s.Check(ctx, "r", 1<<63+1); err != nil {
		t.Fatalf("token 2^63+1: %v", err)
	}
	var se *leasehold.StaleTokenError
	if err := s.Check(ctx, "r", 1<<63); !errors.As(err, &se) || se.Highest != 1<<63+1 {
		t.Fatalf("token 2^63 after 2^63+1: %v, want a StaleTokenError naming 2^63+1", err)
	}
	if err := s.Check(ctx, "r", 0); !errors.Is(err, fence.ErrInvalidFence) {
		t.Fatalf("token 0: %v, want ErrInvalidFence", err)
	}
}
