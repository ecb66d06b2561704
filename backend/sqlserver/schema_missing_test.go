package sqlserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
)

// TestAcquireWithoutSchemaSaysRunEnsureSchema: when the server says the
// lease table is an invalid object name (208), Acquire fails with
// ErrSchemaMissing, whose text says what to run, and the server's error
// stays matchable.
func TestAcquireWithoutSchemaSaysRunEnsureSchema(t *testing.T) {
	b, mock := newMockBackend(t)
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "a", TTL: time.Second}
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).
		WillReturnError(mssql.Error{Number: 208, Class: 16, Message: "Invalid object name 'dbo.leasehold_leases'."})
	_, err := b.Acquire(context.Background(), req)
	var me mssql.Error
	if !errors.Is(err, ErrSchemaMissing) || !errors.As(err, &me) || me.Number != 208 {
		t.Fatalf("Acquire on a missing table: %v; want ErrSchemaMissing wrapping the server's error 208", err)
	}
	if !strings.Contains(err.Error(), "run EnsureSchema (or apply CreateScript) first") {
		t.Errorf("error %q does not say to run EnsureSchema", err)
	}
}
