// Package postgres is the PostgreSQL lease store for leasehold, built on
// github.com/jackc/pgx/v5.
//
// It keeps the row design of the SQL Server backend: one row per lease name in
// a table (default lease.leases) holding the owner, the fencing token, the
// acquire/renew/expiry times and metadata. Expiry is decided by the server's
// clock_timestamp(); the client clock is never consulted.
//
// Acquire runs in one transaction, sent in one round trip: a per-name
// transaction advisory lock, then a single INSERT ... ON CONFLICT DO UPDATE
// that reads the clock once and inserts, takes over an expired row, refreshes
// the caller's own live row, or reports the holder. The fencing token is drawn
// from a sequence (CACHE 1) only after the lock, so grants of one name are
// serialised and their tokens strictly increase. Renew and Release are single
// statements filtered by name, owner and token; Release sends a NOTIFY that
// WatchReleases (one LISTEN connection) delivers, so waiters wake at once.
//
// Create the table with EnsureSchema at start-up, or run the DDL of
// CreateScript out of band. PostgreSQL 12 or newer is required.
package postgres
