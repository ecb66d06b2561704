package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/fencetest"
)

// fenceEnv is a schema of its own holding a fence table and a data table,
// dropped at cleanup.
type fenceEnv struct {
	pool  *pgxpool.Pool
	table FenceTable
	data  string // quoted data table: resource -> value
}

func newFenceEnv(t *testing.T) *fenceEnv {
	t.Helper()
	pool := newPool(t, "lh_fence")
	e := &fenceEnv{pool: pool, table: FenceTable{Schema: randomName("lh_fence_"), Table: "fences"}}
	e.data = pgx.Identifier{e.table.Schema, "data"}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := EnsureFenceSchema(ctx, pool, e.table.Schema, e.table.Table); err != nil {
		t.Fatalf("EnsureFenceSchema: %v", err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+e.data+" (resource text PRIMARY KEY, value text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{e.table.Schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop test schema: %v", err)
		}
	})
	return e
}

// Write is a caller's transaction: the fence, then the write.
func (e *fenceEnv) Write(ctx context.Context, resource string, token uint64, value string) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if err := e.table.Fence(ctx, tx, resource, token); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+e.data+" VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value", resource, value)
		return err
	})
}

func (e *fenceEnv) Read(ctx context.Context, resource string) (string, error) {
	var v string
	err := e.pool.QueryRow(ctx, "SELECT value FROM "+e.data+" WHERE resource = $1", resource).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
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
		return fencetest.StoreGuard(FenceStore(e.pool, e.table))
	})
}

// TestFenceHoldsTheNewerHolderBack checks the serialisation the guard
// promises: while an older holder's transaction has passed the fence and not
// yet committed, a newer holder's Fence waits; the older writes commit, then
// the newer holder's land after them.
func TestFenceHoldsTheNewerHolderBack(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	txA, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback(ctx)
	if err := e.table.Fence(ctx, txA, "r", 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Write(ctx, "r", 2, "B") }()
	// B's Fence waits on A's row lock: pg_locks shows a lock not granted.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		if err := e.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND pid IN (SELECT pid FROM pg_stat_activity WHERE application_name = 'lh_fence'))").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("B's write did not wait for A's transaction: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("B's write is not waiting on a lock")
		}
		time.Sleep(10 * time.Millisecond) // polling the server's lock table
	}
	if _, err := txA.Exec(ctx, "INSERT INTO "+e.data+" VALUES ('r', 'A')"); err != nil {
		t.Fatal(err)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("B's write: %v", err)
	}
	if v, _ := e.Read(ctx, "r"); v != "B" {
		t.Fatalf("value %q, want B's", v)
	}
}

func TestFenceSchemaIsIdempotentAndChecked(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	if err := EnsureFenceSchema(ctx, e.pool, e.table.Schema, e.table.Table); err != nil {
		t.Fatalf("second EnsureFenceSchema: %v", err)
	}
	// The data table is in the way of a fence table of that name.
	err := EnsureFenceSchema(ctx, e.pool, e.table.Schema, "data")
	if !errors.Is(err, ErrSchemaConflict) {
		t.Fatalf("EnsureFenceSchema over the data table: %v, want ErrSchemaConflict", err)
	}
	if err := EnsureFenceSchema(ctx, e.pool, e.table.Schema, ""); !errors.Is(err, ErrInvalidIdentifier) {
		t.Fatalf("empty table: %v, want ErrInvalidIdentifier", err)
	}
	if s := FenceCreateScript("s", ""); !strings.HasPrefix(s, "--") {
		t.Fatalf("FenceCreateScript of an invalid name: %q", s)
	}
}

func TestFenceCreateScriptMakesAWorkingTable(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	other := FenceTable{Schema: e.table.Schema, Table: `odd "name"; --`}
	if _, err := e.pool.Exec(ctx, FenceCreateScript(other.Schema, other.Table)); err != nil {
		t.Fatalf("FenceCreateScript: %v", err)
	}
	s := FenceStore(e.pool, other)
	if err := s.Check(ctx, "r", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx, "r", 1); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("token 1 after 2: %v, want ErrStaleToken", err)
	}
}

func TestFenceRefusesTokensBeyondBigint(t *testing.T) {
	e := newFenceEnv(t)
	err := FenceStore(e.pool, e.table).Check(context.Background(), "r", 1<<63)
	if !errors.Is(err, fence.ErrInvalidFence) {
		t.Fatalf("token 2^63: %v, want ErrInvalidFence", err)
	}
}
