package mysql_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"

	_ "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/backend/mysql"
)

// The MySQL guard of docs/fencing-tokens.md, verbatim between the markers
// (readme_test.go in the root package checks it). It runs against
// $LEASEHOLD_MYSQL_DSN (default: the local test database); the lease comes
// from the memory backend, since the guard works with a lease of any.
func Example_fence() {
	ctx := context.Background()
	db, err := sql.Open("mysql", cmp.Or(os.Getenv("LEASEHOLD_MYSQL_DSN"), "root@tcp(127.0.0.1:3306)/test"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS invoices (month VARCHAR(7) PRIMARY KEY, closed BOOL NOT NULL) ENGINE=InnoDB"); err != nil {
		panic(err)
	}
	m, _ := leasehold.New(memory.New())
	defer m.Close(ctx)
	run := func() error {
		// docs/fencing-tokens.md: MySQL
		if err := mysql.EnsureFenceSchema(ctx, db, mysql.DefaultSchema, mysql.DefaultFenceTable); err != nil {
			return err
		}
		return m.Do(ctx, "month-close", func(ctx context.Context) error {
			l, _ := leasehold.LeaseFrom(ctx)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := mysql.Fence(ctx, tx, "month-close", l.Token()); err != nil {
				return err // leasehold.ErrStaleToken: a newer holder took over
			}
			if _, err := tx.ExecContext(ctx, "UPDATE invoices SET closed = 1 WHERE month = ?", "2026-11"); err != nil {
				return err
			}
			return tx.Commit()
		})
		// end docs
	}
	fmt.Println("done:", run())
	// Output:
	// done: <nil>
}
