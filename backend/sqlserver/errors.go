package sqlserver

import (
	"errors"
	"fmt"
	"slices"

	mssql "github.com/microsoft/go-mssqldb"
)

// ErrDelayedDurability is returned (wrapped) by EnsureSchema and Acquire when
// the database has DELAYED_DURABILITY = FORCED. Commits there return before
// they are on disk, so a crash can lose an acknowledged grant together with
// the sequence's advance, and a later grant would repeat its fencing token.
// Per-transaction durability cannot override FORCED; set the database to
// DISABLED (or ALLOWED: the backend's own commits stay fully durable then).
var ErrDelayedDurability = errors.New("sqlserver: the database forces delayed durability (DELAYED_DURABILITY = FORCED), so acknowledged grants can be lost and fencing tokens repeated")

// ErrRowVersionRefused is returned (wrapped) by EnsureSchema when the server
// refuses the ROWVERSION column the lease table needs: Babelfish for
// PostgreSQL does unless its escape hatch is set, server-wide, with
// EXEC sp_babelfish_configure 'babelfishpg_tsql.escape_hatch_rowversion', 'ignore', 'server'.
var ErrRowVersionRefused = errors.New("sqlserver: the server refuses ROWVERSION columns: on Babelfish for PostgreSQL set babelfishpg_tsql.escape_hatch_rowversion to 'ignore' (EXEC sp_babelfish_configure 'babelfishpg_tsql.escape_hatch_rowversion', 'ignore', 'server')")

// ErrReplicaNotConfirmed is returned (wrapped) by Acquire when a grant was not
// confirmed on the replica in time and releasing it on the primary failed as
// well: the grant may still stand, so this is a fault (the engine cleans up as
// after any ambiguous acquire), not a refusal.
var ErrReplicaNotConfirmed = errors.New("sqlserver: grant not confirmed on the read replica in time")

// ErrSchemaMissing is returned (wrapped, with the server's error) by a call
// that found no lease table: the tables are made by EnsureSchema or by
// applying CreateScript, before the first Acquire.
var ErrSchemaMissing = errors.New("sqlserver: the lease tables do not exist: run EnsureSchema (or apply CreateScript) first")

// errInvalidObjectName is SQL Server's "Invalid object name" (a table that
// does not exist).
const errInvalidObjectName = 208

// schemaMissing wraps err with ErrSchemaMissing when the server said a table
// does not exist, keeping the server's error matchable with errors.As.
func schemaMissing(err error) error {
	if hasErrorNumber(err, errInvalidObjectName) {
		return fmt.Errorf("%w: %w", ErrSchemaMissing, err)
	}
	return err
}

// hasErrorNumber reports whether err carries a SQL Server error with one of
// numbers, as the last error or as any earlier error of the same batch
// (mssql.Error.All), also inside a mssql.ServerError.
func hasErrorNumber(err error, numbers ...int32) bool {
	var me mssql.Error
	if !errors.As(err, &me) {
		return false
	}
	if slices.Contains(numbers, me.Number) {
		return true
	}
	for _, e := range me.All {
		if slices.Contains(numbers, e.Number) {
			return true
		}
	}
	return false
}
