// Package mysql is the MySQL and MariaDB backend of leasehold: leases kept
// in InnoDB tables of a database, with expiry judged on the server's clock,
// fencing tokens drawn from a durable AUTO_INCREMENT, a waiter queue with
// hand-off (backend/queue.go) and names with up to backend.MaxLimit holders
// (backend/limit.go).
//
// Three tables make a lease table: <table>, one row per name in use, which
// every call that changes a name locks first; <table>_holds, one row per
// holding (its token is the row's AUTO_INCREMENT key); <table>_queue, one
// row per queued attempt, in arrival order. Every text column is
// VARBINARY, so names compare byte for byte: "s", "s " and "S" are three
// names. Create them with EnsureSchema or deploy CreateScript's output.
//
// Acquire, Release and Revoke are each one CALL of a stored procedure beside
// the tables (<table>_acq, _rel, _rev; the sweep's is _swp), which runs one
// READ COMMITTED transaction: lock the name's row (INSERT ... ON DUPLICATE
// KEY UPDATE), read the clock (UTC_TIMESTAMP(6)), apply the rules to the
// name's holdings and queue, commit, answer. No name's lock is thus held
// while the server waits for the client. Renew is one UPDATE that
// moves a live holding's expiry. Transient errors (deadlock 1213, lock wait
// timeout 1205, a lost connection) run the whole call again; every call is
// idempotent for its attempt, except Revoke, which runs again only when the
// failure certainly rolled it back. Every call ends with its context, and no
// more calls run at once than the pool has connections.
//
// Tokens survive a crash only on a durable server: innodb_flush_log_at_trx_commit
// = 1, and sync_binlog = 1 when the binary log is on, on MySQL 8.0+ or
// MariaDB 10.3+ (whose AUTO_INCREMENT counters survive restarts).
// EnsureSchema and the first Acquire of a Backend refuse any other server
// (ErrNotDurable, ErrServerVersion).
package mysql
