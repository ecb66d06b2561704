package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/backend"
)

// TestAcquireWithoutSchemaSaysRunEnsureSchema: on a table EnsureSchema never
// made, Acquire fails with ErrSchemaMissing, whose text says what to run,
// and the server's error (42P01) stays matchable.
func TestAcquireWithoutSchemaSaysRunEnsureSchema(t *testing.T) {
	pool := newPool(t, randomName("lh_app_"))
	b, err := New(pool, WithTable(randomName("lh_absent_"), "leases"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = b.Acquire(ctx, backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "a", TTL: time.Second})
	var pe *pgconn.PgError
	if !errors.Is(err, ErrSchemaMissing) || !errors.As(err, &pe) || pe.Code != "42P01" {
		t.Fatalf("Acquire on a missing table: %v; want ErrSchemaMissing wrapping the server's 42P01", err)
	}
	if !strings.Contains(err.Error(), "run EnsureSchema (or apply CreateScript) first") {
		t.Errorf("error %q does not say to run EnsureSchema", err)
	}
}
