// Package postgres is the PostgreSQL lease store for leasehold, built on
// github.com/jackc/pgx/v5.
//
// It keeps the row design of the SQL Server backend: one row per lease name in
// a table (default lease.leases) holding the owner, the attempt that made the
// holding, the fencing token, the acquire/renew/expiry times and metadata.
// Expiry is decided by the server's clock_timestamp(); the client clock is
// never consulted.
//
// Acquire runs in one transaction, sent in one round trip: a per-name
// transaction advisory lock, then a single INSERT ... ON CONFLICT DO UPDATE
// that reads the clock once and inserts, takes over an expired row, refreshes
// the live row of the same attempt (a retry), or reports the holding in the
// way with the time it has left. The fencing token is drawn from a sequence
// (CACHE 1) only after the lock, so grants of one name are serialised and
// their tokens strictly increase. Renew is a single statement filtered by
// name, owner, attempt and token; Release is one transaction with the same
// filter (token 0: any token of that attempt) and sends a NOTIFY that
// WatchReleases (on a LISTEN connection of its own) delivers, so waiters wake at once,
// or hands the name to the head of its waiter queue (below).
//
// Acquire, Renew, RenewBatch and Release commit synchronously whatever the
// server's synchronous_commit (set per transaction, inside a statement that
// is sent anyway): with asynchronous commit a crash could lose an
// acknowledged grant and the sequence's advance, and the next grant would
// repeat a token. Batch gives the same guarantee with one flush per round
// trip: its calls commit without waiting, and it ends with one more
// transaction that writes a logical message (pg_logical_emit_message, which
// every role may call unless an administrator revoked it) and waits for the
// flush, which covers the earlier commits; it answers nothing before that.
//
// Create the table with EnsureSchema at start-up, or run the DDL of
// CreateScript out of band. PostgreSQL 12 or newer is required.
//
// # Connections
//
// Statements use the pool handed to New and count against its MaxConns. A
// Manager on this backend also runs two watches (WatchReleases and
// WatchHandOffs), and each LISTENs on a connection of its own that it takes
// out of the pool (pgxpool's Hijack): those two no longer count against
// MaxConns, so that the watches can never starve the statements, and the pool
// opens others in their place. N Managers sharing one pool therefore hold up
// to MaxConns + 2N connections to the server (measured by
// TestManagersSharingAPoolHoldTwoConnectionsEach): size the server's
// max_connections, or a connection pooler's limit, for that. A watch that
// reconnects closes its old connection first: it never holds two.
//
// # Upgrading from the version without attempts
//
// EnsureSchema (or CreateScript's ALTER TABLE statements) adds the attempt
// column (and the waited column, see below) to a table of the previous version. Rows already there get
// an empty attempt, which no request can name: they are never refreshed,
// renewed or released by this version, and end by their expiry. After the upgrade,
// acquires of a process still running the previous version fail (attempt is
// NOT NULL) while its existing leases can still be renewed and released. Do
// not run both versions on one table: stop the old processes first (an old
// release with token 0 could still delete a holding of the same owner name).
//
// # Announced releases
//
// A release (or revoke) is announced on Channel only when an acquire attempt
// that will wait (AcquireRequest.Wait) was refused by that holding: it marks
// the row (column waited). Releases nobody waits for cost no NOTIFY. A table
// made by a version without the column gets it from EnsureSchema.
//
// # The waiter queue and the hand-off
//
// The store keeps the waiter queue of backend/queue.go (Info().Queue) in a
// second table, named after the lease table with "_queue" (one row per
// queued attempt, in arrival order; see CreateScript). Acquire keeps it in
// its one statement: a refused attempt that waits with a QueueRequest is
// queued, and a free name whose live head is another attempt stays that
// head's for its pickup window, from the first acquire that found it so (the
// turn's start is kept on the head's entry). Release and Revoke of a live
// holding hand the name, in their transaction, to the live head: a new
// holding with a new token, expiring after the entry's pickup window,
// announced with NOTIFY at commit on the channel of the entry's address,
// which WatchHandOffs listens on (it documents the channel and the payload).
// A hand-off is not announced on Channel (the name is not free); the mark of
// the holding it replaces goes with it. The sweep (WithSweep) also deletes
// expired queue entries.
//
// EnsureSchema (or CreateScript) creates the queue's table on an installation
// of the previous version; run it before starting processes of this version,
// whose statements need the table. Processes of the previous version keep
// working on the upgraded table but ignore the queue: they take a free name
// during a head's turn and hand nothing on (fairness is lost while both run,
// never safety).
//
// # Names with several holders
//
// Acquire with Limit n > 1 (backend/limit.go; Info().MaxLimit is
// backend.MaxLimit) keeps the name's holdings in a third table, named after
// the lease table with "_holds" (one row per holding, keyed by name and
// attempt), and one row of the lease table per name, its record: attempt
// "", holder_limit n, the latest token, an expiry never before any live
// holding's end. Such an acquire is one transaction of several statements
// under the name's lock; renewals, releases and revokes of its holdings are
// the exclusive calls' statements, which call the functions "_renew_shared"
// and "_release_shared" for a name that has a record (revoke covers the
// holds table itself). A
// process of an earlier version reads the record as a live holding and
// refuses the name, and the trigger "_keep_shared" on the lease table makes
// its revoke of a live record fail. EnsureSchema (or CreateScript) adds the
// table, the holder_limit columns, the trigger and the functions; run it before starting
// processes of this version (the design: shared.go).
package postgres
