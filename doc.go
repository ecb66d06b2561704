// Package leasehold is an actor-based, in-process lease manager: one Manager
// per process holds, renews and releases any number of named leases at once,
// coordinated across processes and machines through a pluggable backend
// (Redis, SQL Server, PostgreSQL, or the in-process memory backend).
//
// A lease is held until it is released or lost. Loss is signalled the Go way:
// Lease.Lost is closed, Lease.Context is cancelled with cause ErrLost, and every
// Subscription receives a LostEvent. A holder learns of a loss before anyone
// else can be granted the lease: the handle keeps a local deadline (the moment
// the acquire or renew request was sent, plus TTL, minus a safety margin) on
// the monotonic clock, and gives up at that deadline when no renewal was
// confirmed, whatever the reason (fail closed: better lose than hold twice).
//
// Every grant carries a fencing token, strictly increasing per name across
// release, expiry and takeover: pass it to the resource you protect and let it
// reject writes with an older token.
//
// Inside, each name is served by its own actor (github.com/asynkron/protoactor-go)
// that owns its state machine and its FIFO queue of local waiters; see package
// actors and, for the protocol, package messages.
package leasehold
