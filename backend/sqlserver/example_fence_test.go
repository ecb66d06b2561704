package sqlserver_test

import (
	"context"
	"database/sql"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/sqlserver"
)

// The SQL Server guard of docs/fencing-tokens.md, verbatim between the
// markers (readme_test.go in the root package checks it). Compiled, not
// run: no SQL Server runs here.
func Example_fence() {
	ctx := context.Background()
	var db *sql.DB // sql.Open("sqlserver", dsn)
	var m *leasehold.Manager
	run := func() error {
		// docs/fencing-tokens.md: SQL Server
		if err := sqlserver.EnsureFenceSchema(ctx, db, sqlserver.DefaultSchema, sqlserver.DefaultFenceTable); err != nil {
			return err
		}
		return m.Do(ctx, "month-close", func(ctx context.Context) error {
			l, _ := leasehold.LeaseFrom(ctx)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := sqlserver.Fence(ctx, tx, "month-close", l.Token()); err != nil {
				return err // leasehold.ErrStaleToken: a newer holder took over
			}
			if _, err := tx.ExecContext(ctx, "UPDATE dbo.Invoices SET Closed = 1 WHERE Month = @m", sql.Named("m", "2026-11")); err != nil {
				return err
			}
			return tx.Commit()
		})
		// end docs
	}
	_ = run
}
