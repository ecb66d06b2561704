package sqlserver_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/sqlserver"
	_ "github.com/microsoft/go-mssqldb" // the "sqlserver" database/sql driver
)

// One job run by one process at a time through SQL Server. It needs a server
// ($LEASEHOLD_SQLSERVER_DSN, e.g. sqlserver://user:pass@host?database=app),
// so it is compiled but not run by go test.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("sqlserver", os.Getenv("LEASEHOLD_SQLSERVER_DSN"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	// At start-up: creates lease.Leases and its waiter queue,
	// lease.Leases_Queue, when they are missing (idempotent).
	if err := sqlserver.EnsureSchema(ctx, db, sqlserver.DefaultSchema, sqlserver.DefaultTable); err != nil {
		panic(err)
	}
	store, err := sqlserver.New(db)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	m, err := leasehold.New(store, leasehold.WithOwner("worker-1"))
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	// SQL Server sends no release notification: a waiter wakes at the
	// holder's expiry, or polls; a waiter queued with the store (see
	// backend.QueueRequest) is handed the name by the release and picks it
	// up with its next poll.
	err = m.Do(ctx, "nightly-report", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		fmt.Println("running the nightly report with fencing token", l.Token())
		return nil // ctx is cancelled if the lease is lost meanwhile
	}, leasehold.WithTTL(30*time.Second), leasehold.WithWait(time.Minute))
	fmt.Println("done:", err)
}
