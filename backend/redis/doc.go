// Package redis is the Redis lease store of leasehold: leases shared by many
// processes and machines through one Redis deployment (a single node, Sentinel
// through a failover client, or Redis Cluster).
//
// # Operations
//
// Acquire, Renew and Release are each one server round trip: a Lua script
// (embedded, called by SHA with a fallback to EVAL when the server's script
// cache is empty) that reads and writes only the keys of one name. Expiry is a
// deadline on the server's TIME kept in the name's record, and every
// ExpiresAt comes from the server's TIME, never from the client's clock.
//
// # Key layout
//
// For a key K and the prefix P (default "leasehold:"), every key of K is
// P{E}: followed by its role (lease, token, queue, entries, revoked), where E
// is K with "%", "{" and "}" percent-encoded, so that every name maps to its
// own keys (no two names collide) and all keys of one name share the hash
// tag {E}: a script touching them runs on one Redis Cluster slot. Releases
// are published on the channel P+"releases", hand-offs on P+"handoff:" and
// the Manager's address. What each key holds and when it expires, and what
// each script takes and returns, is written down once, in scripts/CONTRACT.md.
//
// The lease key is the name's record: one hash with the holder, its token,
// which is also the name's fence counter, its deadline, and the waiters'
// mark. It has no TTL while the name is held or awaited; a release that
// leaves it free with nobody queued sets it to expire WithForgetAfter after
// the name's last grant, past which the server's clock outbids every token
// the name had (MEMORY USAGE on Redis 7 with a 30-byte key: 152 bytes for
// a free record), and List's SCAN visits free names until then. Earlier
// versions kept a holding as a hash with a PX expiry and the counter in the
// token key: the scripts honour such holdings and carry such a counter into
// the record at the name's next grant, so an upgraded deployment needs no
// migration. Older processes fail, and grant nothing, on names the new
// layout has written: upgrade all processes of one prefix (CONTRACT.md has
// the details, and what an older Revoke does).
//
// # Holdings
//
// The record remembers the attempt that made the holding. Acquire by that
// same attempt refreshes it (same token); anyone else, the same owner's other
// attempts included, is refused with the holder, its token, its expiry on the
// server's clock and the time it had left.
// Renew and Release name the holding by owner, attempt and token.
//
// # Several holders
//
// A name acquired with a limit n > 1 (leasehold.WithLimit; Info.MaxLimit is
// backend.MaxLimit) keeps up to n holdings in the same record, each a field
// of its own (attempt → deadline, token, owner, metadata), with the limit, a
// count, and the shared fence counter: one hash, one hash tag, so it works
// on Cluster as an exclusive name does. Each holding renews and releases on
// its own; a release or revoke hands its one slot to the head of the queue
// (waiting under the same limit) in the same script; Inspect answers the
// holding that ends first, Holders and List all of them. An acquire under
// another limit than the live holdings' is refused with Grant.HeldLimit and
// changes nothing. The exclusive paths make exactly the calls they made
// before (the record's owner tells them, "\x00" for a shared record). Older
// processes fail on such a name as on any record (their Revoke deletes it,
// every holding with it). CONTRACT.md has the fields and each script's
// steps.
//
// # Fencing tokens
//
// A new grant's token is max(counter + 1, server TIME in microseconds), and
// the counter (the record's token) is set to it. Tokens therefore look like 1.8e15 (microseconds
// since 1970), not 1, 2, 3: that is on purpose. Redis can lose the last
// writes and keep an older counter: a restart from an older RDB snapshot, the
// unsynced last second of an appendfsync everysec AOF, a failover to a replica
// that lagged. Counter + 1 alone would then hand out a token that was already
// issued, and a fenced resource could not tell the new holder from the old.
// The clock has moved past every token issued before the loss, so tokens keep
// increasing as long as the server's clock (after a failover, the new
// primary's) does not go backwards and a name is granted less than once per
// microsecond on average. A renewal or a retry of the same attempt keeps the
// token.
//
// # Restarts that lose writes
//
// A server that restarts without its data, or with only part of it, may have
// forgotten a live lease: its holder finds out at its next renewal
// (ErrNotHeld) or at its local deadline. To make sure nobody is granted a name
// while its previous holder may still believe it holds it, set
// WithRestartGrace to the longest TTL in use: a free name is then not granted
// until the server has been up for that long. The scripts read the uptime with
// INFO server (callable from Lua in Redis 7), only when the name is free, and
// only when LASTSAVE (the start of the server, or its last save) is more
// recent than the grace: most grants on a server up for long skip it.
//
// # Eviction
//
// Under memory pressure an allkeys-* policy may delete a record and free a
// held name. Held records have no TTL, so volatile-* policies pass them by,
// but not free records waiting to be forgotten (harmless: the next token
// rests on the clock), a holding written by an earlier version (it has a
// TTL), nor the queue's keys. New checks the policy of every server and refuses any but
// noeviction with ErrEvictionPolicy, unless WithEvictionAllowed accepts the
// risk. The policy is read once, in New: a later CONFIG SET is not seen.
//
// # Replica confirmation
//
// With WithReplicaConfirmation, a grant is confirmed with WAIT: when fewer
// replicas than asked acknowledge it within the timeout, the grant is released
// and Acquire fails with ErrNotConfirmed, because a failover to a replica that
// never saw it would let another owner take the name while this one works. It
// is a fault, not "not acquired": nobody holds the name. Renewals are
// confirmed the same way and fail with ErrNotConfirmed when they cannot be.
//
// # Release notifications
//
// A refused Acquire with Wait set marks the holding in the way (field w of
// the record); Release and Revoke publish the key when they end a marked
// holding that they hand to nobody, and nothing otherwise, so that a release
// nobody waits for costs no PUBLISH. Info says AnnouncesReleases (unless
// WithReleaseNotifications(false)): WatchReleases keeps a single
// subscription per watch, so the engine can wake waiters at once. Expiry
// publishes nothing; waiters also wake at the holder's expiry.
//
// # The waiter queue
//
// Info says Queue (unless WithWaiterQueue(false)): the backend keeps the
// FIFO queue of backend/queue.go per name, on the server, in the name's hash
// tag. A refused waiting Acquire with a QueueRequest puts its attempt at the
// tail (once; its later polls renew the entry where it stands), and a
// release of the holding hands the name, in the same script, to the live
// head: a new holding of that attempt for its pickup window, picked up by
// its next Acquire (or a Renew with the token of the notice). When the name
// became free by expiry, the head has the turn for its pickup window,
// counted from the first acquire that finds it free. A queue holds at most
// backend.MaxQueueEntries live entries; its keys expire after the last
// entry's, so the queues of waiters that died vanish by themselves.
//
// The queue costs the other paths little: an acquire of a free name and a
// release look at it only when the record is marked (w), which every
// refusal that queues, every hand-off and every grant made while the queue
// has entries sets; an unmarked acquire or release is one read and one
// write of the record.
//
// Info says HandOffNotices (unless WithReleaseNotifications(false)):
// WatchHandOffs subscribes to
// the channel of one address (HandOffChannel), and a release that hands the
// name to an entry with that address publishes the name, owner, attempt,
// new token and poll number there (pub/sub: at most once; on Cluster,
// PUBLISH reaches subscribers on every node).
//
// # Batches
//
// Info says Batches: Batch sends the scripts of many calls
// (acquires, renewals, releases, several on one name in order) in one
// pipeline, each call answered as its single call would be. On Cluster the
// client's pipeline is split by node; under replica confirmation there is one
// pipeline per master with one WAIT at its end that confirms all its writes.
// A server that forgot the scripts (restart, failover, SCRIPT FLUSH) gets
// them loaded and the calls it refused sent again.
//
// RenewBatch renews many holdings
// in one pipelined round trip, up to 500 in each script call (renew_many,
// which renews each as the renew script does), with per-lease results, and
// fails as a whole when the round trip cannot be confirmed. On Cluster the
// batch is split by the master of each name's slot, one pipeline per master
// (with its own WAIT under replica confirmation), in parallel, one script
// call per slot (the keys of one call must share a slot): a master that is
// down leaves only its own renewals unconfirmed.
//
// # Failover
//
// What each topology guarantees is tested with 1,000 leases held while a
// primary fails (failover_test.go): with replica confirmation no name is ever
// granted while its previous holder may still hold it, and tokens never
// repeat in any case. A failover is not a restart: a promoted replica has been
// up as long as it ran, so WithRestartGrace does not hold names back on it.
// After a fault on Cluster, of a call or of a watch, the backend asks the
// ClusterClient to reload its slot map (go-redis follows MOVED but keeps a
// dead master until ClusterStateReloadInterval otherwise).
//
// # Operator's view
//
// Inspect is one read-only script; List is SCAN by name prefix, on every
// master of a Cluster, each page read in one pipeline; Revoke ends the
// holding, keeps the counter so the token is never issued again,
// publishes the release, and leaves a receipt naming the call, so that
// go-redis's resend of the script after a lost answer reports the holding
// the first send removed rather than "not there".
//
// # Client settings
//
// The client is the caller's and is not closed by Close. Every call returns
// when its context ends (cancelled or past its deadline), with the context's
// error, whatever the client's options: go-redis lets only a deadline reach
// the socket, so the backend waits for its round trips on goroutines of its
// own and stops waiting when the context ends. The command already sent then
// keeps its connection until the client gives up on the read, and go-redis
// closes that connection; a later call on the same name waits for it first
// (within its own context), so that the server never runs the two out of
// order. Set ContextTimeoutEnabled, so that a deadline ends that read too, and
// keep ReadTimeout finite: without either, a command lost in a partition holds
// its connection (and a goroutine) until the operating system gives up on the
// link.
//
// On Cluster, let the client give up on a dead master at once: MaxRetries -1,
// MaxRedirects 1, and node clients with DialerRetries 1 (set through
// ClusterOptions.NewClient). go-redis's defaults spend about a second on each
// call to a dead master; the engine retries unconfirmed renewals itself and
// bounds its concurrent backend calls, so with many leases on the dead master
// those slow calls delay the renewals of the live masters' leases.
package redis
