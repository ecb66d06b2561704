// Package leasehold is an actor-based, in-process lease manager: one Manager
// per process holds, renews and releases any number of named leases at once,
// coordinated across processes and machines through a pluggable backend
// (Redis, PostgreSQL, SQL Server, MySQL/MariaDB, etcd, or the in-process memory
// backend).
//
// A lease is held until it is released or lost. Loss is signalled the Go way:
// Lease.Lost is closed, Lease.Context is cancelled with cause ErrLost, and every
// Subscription receives a LostEvent. A holder learns of a loss before anyone
// else can be granted the lease: the handle keeps a local deadline (the moment
// the acquire or renew request was sent, plus TTL, minus a safety margin) on
// the monotonic clock, and gives up at that deadline when no renewal was
// confirmed, whatever the reason (fail closed: better lose than hold twice).
//
// Inside, each name is served by its own actor (github.com/asynkron/protoactor-go)
// that owns its state machine and its FIFO queue of local waiters; the
// Manager's methods talk to them and never block one.
//
// # Fencing tokens
//
// Every grant carries a fencing token, strictly increasing per name across
// release, expiry and takeover: pass it to the resource you protect and let it
// reject writes with an older token. A renewal, or a retry of the same
// acquire, keeps the token. Tokens are ordered, not counted: compare them,
// never expect them to be consecutive. What they look like depends on the
// backend:
//
//   - memory: 1, 2, 3, … from one counter for all the names of the backend,
//     so a name's tokens skip the values other names took.
//   - Redis: about 1.8e15. A grant's token is max(counter + 1, the server's
//     TIME in microseconds): a server that lost its last writes (restarted
//     from an old snapshot, a lagging replica promoted) keeps an older
//     counter, but its clock has moved past every token issued before, so no
//     token is repeated.
//   - PostgreSQL and SQL Server: drawn from one SEQUENCE per table, shared by
//     all its names. On PostgreSQL every acquire draws a value, even one that
//     is refused because the name is busy or that refreshes the same attempt
//     (the upsert computes nextval before it meets the existing row), so a
//     waiter refused once and then granted makes a name's tokens step by two,
//     or more. SQL Server draws a value only for a grant.
//   - etcd: the key's CreateRevision, a revision of the whole cluster, which
//     jumps by the number of writes the cluster made in between.
package leasehold
