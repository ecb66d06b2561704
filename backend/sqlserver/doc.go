// Package sqlserver is the SQL Server backend of leasehold: the row lease of
// the Aaravsoft.Distributed.Lease product (one row per lease name, expiry
// decided by SYSDATETIMEOFFSET, opportunistic sweep of expired rows,
// idempotent re-acquire, filtered renew and release, optional read-replica
// confirmation by RowVersion, custom schema and table, metadata, logging)
// made correct, named by holding (owner and attempt) and given fencing
// tokens.
//
// The table has one row per held name (owner, the acquire attempt that made
// the holding, the fencing token drawn from a SEQUENCE, the acquire, renew
// and expiry times, metadata and a RowVersion), and waiting attempts queue in
// a second table, <table>_Queue (backend/queue.go): one row per queued
// attempt of a name, in arrival order (an IDENTITY Position), with its owner,
// metadata, pickup window, poll number, entry expiry and, on the head entry,
// the start of the head's turn. A name acquired with a limit above 1
// (backend/limit.go) keeps its holdings in a third table, <table>_Holds, and
// one row of the lease table as its record (shared.go); Info().MaxLimit is
// backend.MaxLimit. CreateScript writes all three; the repository's
// docs/backends/sqlserver.md shows them for the default names.
//
// Names and owners use a binary collation, so "Foo" and "foo" are different
// leases. SQL Server ignores trailing spaces when it compares strings even
// under a binary collation, so every comparison also compares DATALENGTH,
// and the primary key includes LeaseNameBytes (kept equal to
// DATALENGTH(LeaseName) by a CHECK constraint): "a" and "a " never collide.
//
// Every operation is one batch sent with database/sql. Acquire runs, with SET
// XACT_ABORT ON, a check that the database does not force delayed durability
// (ErrDelayedDurability), a best-effort sweep of expired rows and queue
// entries as their own statements and then one transaction that locks the
// name (UPDLOCK, HOLDLOCK), reads the server clock once and inserts, takes
// over an expired row, refreshes the live row of the same attempt (a retry,
// or the pickup of a hand-off: same token) or reports the holding in the way
// (any other attempt, the same owner's included) with its token and its
// remaining time measured on that clock read; in the same transaction it
// keeps the name's queue: the head's turn on a free name, the caller's entry
// added, kept in place or removed (Info().Queue is true). Renew filters by
// name, owner, attempt and token. Release does too (token 0: that
// attempt's holding, whatever its token), under the same lock, and hands a
// live holding to the head of the queue in the same transaction, which then
// holds the name for its pickup window; it also removes the attempt's own
// entry (a waiter leaving). Transient errors (deadlock victim,
// Azure SQL throttling and failover numbers, and a dropped connection as
// go-mssqldb reports it: driver.ErrBadConn, mssql.StreamError,
// mssql.ServerError, net.Error, io.EOF) are retried as a whole batch, which is
// safe because every batch is idempotent for its attempt. Inspect, List (by
// exact byte prefix) and Revoke (fencing: the revoked token is never drawn
// again, and it hands the name on as a release does) give operators their
// view; Revoke alone is never retried. RenewBatch renews up to 400 holdings
// in one UPDATE joined to the requests. Info declares neither
// AnnouncesReleases nor HandOffNotices: SQL Server has no cheap notification, so waiters wake at the holder's expiry
// or by polling, and pick a hand-off up with their next poll.
//
// Create the tables once with EnsureSchema (idempotent, safe when several
// instances start at once; it adds AttemptId to a table made by an earlier
// version, whose old rows then belong to no attempt and simply expire, and
// creates the queue table, the holds table, the HolderLimit columns and the
// keep trigger an earlier version lacked) or deploy the output of
// CreateScript out of band. Both refuse, and so does
// every acquire, a database with DELAYED_DURABILITY = FORCED: its commits
// return before they are on disk, so a crash could lose an acknowledged grant
// and the sequence's advance, and repeat a fencing token.
//
// There is no SQL Server on the machines this package is developed on: its SQL
// text, parameters, result scanning, retry and replica logic are unit-tested
// with go-sqlmock, every batch is parsed by the grammars-v4 T-SQL grammar
// (internal/tsqlcheck), and the conformance suite runs against a real server
// only when LEASEHOLD_SQLSERVER_DSN is set.
package sqlserver
