package sqlserver_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/sqlserver"
)

// The Go block of docs/backends/sqlserver.md, verbatim between the markers
// (readme_test.go in the root package checks it), as the body of a function
// returning an error. It needs a server and a readable secondary, so it is
// compiled but not run by go test.
func Example_readme() {
	ctx := context.Background()
	dsn := os.Getenv("LEASEHOLD_SQLSERVER_DSN")
	replicaDB, err := sql.Open("sqlserver", os.Getenv("LEASEHOLD_SQLSERVER_REPLICA_DSN"))
	if err != nil {
		panic(err)
	}
	defer replicaDB.Close()
	logger := slog.Default()
	run := func() error {
		// docs/backends/sqlserver.md
		db, _ := sql.Open("sqlserver", dsn) // github.com/microsoft/go-mssqldb
		if err := sqlserver.EnsureSchema(ctx, db, "lease", "Leases"); err != nil {
			return err
		}
		b, err := sqlserver.New(db,
			sqlserver.WithReplica(replicaDB), sqlserver.WithReplicaTimeout(5*time.Second), // optional
			sqlserver.WithLogger(logger))
		m, err := leasehold.New(b)
		// end docs
		if err != nil {
			return err
		}
		defer db.Close()
		defer b.Close()
		return m.Close(ctx)
	}
	fmt.Println("done:", run())
}
