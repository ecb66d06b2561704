// Package redis is the Redis lease store of leasehold: leases shared by many
// processes and machines through one Redis deployment (a single node, Sentinel
// through a failover client, or Redis Cluster).
//
// # Operations
//
// Acquire, Renew and Release are each one server round trip: a Lua script
// (embedded, called by SHA with a fallback to EVAL when the server's script
// cache is empty) that reads and writes only the keys of one name. Expiry is the
// key's PX deadline on the server, and every ExpiresAt comes from the server's
// TIME, never from the client's clock.
//
// # Key layout
//
// For a key K and the prefix P (default "leasehold:"), the backend uses
//
//	P{E}:lease   a hash with fields owner, token and meta; expires with the lease
//	P{E}:token   the fencing counter of K; never expires
//	P releases   the pub/sub channel of releases (P + "releases"); messages carry K
//
// where E is K with "%", "{" and "}" percent-encoded, so that every name maps to
// its own keys (no two names collide) and both keys of one name share the hash
// tag {E}: a script touching them runs on one Redis Cluster slot.
//
// # Fencing tokens
//
// A new grant takes INCR of the name's counter; a renewal or the same owner's
// repeated acquire keeps the token. When the counter is missing (first use, or a
// restart that lost the data) it is first set to the server's TIME in
// microseconds, so tokens keep increasing across data loss as long as the
// server clock does not go backwards and a name is granted less than once per
// microsecond on average.
//
// # Restarts without persistence
//
// A server that restarts without its data forgets every lease: their holders
// find out at their next renewal (ErrNotHeld) or at their local deadline. To
// make sure nobody is granted a name while its previous holder may still
// believe it holds it, set WithRestartGrace to the longest TTL in use: a name
// whose counter is missing is then not granted until the server has been up for
// that long.
//
// # Replica confirmation
//
// With WithReplicaConfirmation, a grant is confirmed with WAIT: when fewer
// replicas than asked acknowledge it within the timeout, the grant is released
// and reported as not acquired, because a failover to a replica that never saw
// it would let another owner take the name while this one works. Renewals are
// confirmed the same way and fail with ErrNotConfirmed when they cannot be.
//
// # Release notifications
//
// Release publishes the released key, and Backend implements
// backend.ReleaseWatcher with a single subscription per watch, so the engine can
// wake waiters at once. Expiry publishes nothing; waiters also wake at the
// holder's expiry.
//
// # Batched renewal
//
// Backend implements backend.BatchRenewer: RenewBatch sends the renew script
// for many holdings in one pipelined round trip, with per-lease results, and
// fails as a whole when the round trip cannot be confirmed.
//
// # Client settings
//
// The client is the caller's and is not closed by Close. Set
// ContextTimeoutEnabled in its options so that a call's context deadline bounds
// its socket reads; otherwise a call to a stalled server waits for the client's
// ReadTimeout.
package redis
