// Package etcd is the etcd lease store of leasehold: leases shared by many
// processes through an etcd cluster, on go.etcd.io/etcd/client/v3. It is its
// own Go module (github.com/leasehold/leasehold/backend/etcd), so that the
// etcd client's dependencies (gRPC, protobuf, zap) stay out of the graph of
// programs that do not use it.
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"}})
//	b, _ := etcd.New(cli)
//	m, _ := leasehold.New(b)
//
// # Holdings
//
// A holding of key K is the etcd key P+"\x00"+K (P is WithKeyPrefix, default
// "leasehold/"; names hold no NUL, so backends whose prefixes nest never
// share a key) with a small JSON value (owner, attempt, metadata, the TTL
// asked for), attached to an etcd lease of its own. Acquire is a lease grant
// and one transaction: if the key does not exist, put it on the new lease;
// otherwise read it. A retry of the same attempt moves the key to the new
// lease (new TTL and metadata, same token); any other holding is refused,
// with the time its lease has left (LeaseTimeToLive). Renew reads the key,
// checks that it is the holding named (owner, attempt, token), and sends one
// keep-alive for its lease. Release and Revoke delete it (Release by
// revoking its lease, which deletes the key with it).
//
// Versions before the NUL put K right after P ("leasehold/job"): the two
// layouts do not see each other's holdings, so stop every process of an
// older version (or let its leases end) before starting this one.
//
// # Fencing tokens
//
// The token is the key's CreateRevision: the revision of the transaction that
// created the holding. etcd revisions increase strictly across the whole
// cluster and are part of the replicated log, so every new holding gets a
// token greater than any before, through leader changes, member failures
// and restarts, by construction. A renewal or a retry of the same attempt
// keeps it (a put on an existing key keeps its CreateRevision).
//
// # Expiry and TTL limits
//
// Expiry is the etcd lease: the leader counts it down on its own monotonic
// clock and deletes the key when it ends; no wall clock, the client's or the
// server's, decides anything. etcd leases last whole seconds, and a member
// raises any lease shorter than ceil(1.5 × its election timeout) to that. So
// Acquire and Renew refuse, before any call, a TTL that is not a whole number
// of seconds or is below WithMinTTL (default 2s, what a cluster with the
// default timing grants), with backend.ErrInvalidRequest naming the limit; a
// Manager reports it as leasehold.ErrInvalidOption.
//
// When the leader changes, the new leader restarts every lease's countdown
// from its full TTL (plus an election timeout): a lease may outlive its TTL in
// the store after a leader change, never end earlier than it, which is what
// safety needs. The engine's local deadline (from the moment it sent the
// acquire or renewal, minus a margin) still ends first: a holder cut off from
// the cluster stops working before etcd lets anybody else in. The waiters
// then wait a little longer than the TTL after a leader change.
//
// # Renewals in batches
//
// In RenewBatch, up to 128 renewals (etcd's default limit of operations per
// transaction) cost one transaction that reads every key, and keep-alive
// streams (up to four side by side) on which the keep-alives of every lease
// are pipelined. Measured on a three-member loopback cluster on a loaded
// two-core machine, 100 renewals take 26-46 ms in one batch against 180-350
// ms one by one (TestMeasureLatency). Leases are not shared between
// holdings: a shared lease would keep alive a holding whose holder stopped
// renewing it, and revoking it would end every holding on it.
//
// # Release notifications
//
// Info says AnnouncesReleases: WatchReleases keeps one etcd watch on the
// prefix, filtered to deletions. A release, a revoke and the end of a lease
// all delete the key, so waiters wake at once in all three cases, without
// polling. The watch requires a leader: on a member cut off from its cluster
// it is cancelled and started again.
//
// # Operations and server versions
//
// Give the client every member's endpoint, so that it fails over when one
// goes away. Keys other programs write under the prefix are reported as
// errors, never overwritten. A key deleted by hand (etcdctl del) instead of
// through Revoke is a loss too: its holder's next renewal finds it gone, and
// its lease ends by its TTL. Use an etcd server that
// includes etcd-io/etcd#16822 (an old leader stuck on a slow disk may
// otherwise revoke leases early, before their holders' deadlines).
package etcd
