package backend

import (
	"context"
	"errors"
	"time"
)

// Info describes a backend.
type Info struct {
	// Name is a short identifier such as "redis" or "memory".
	Name string
	// ProcessLocal is true when leases are only visible inside this process.
	ProcessLocal bool
	// Queue is true when the store keeps a FIFO queue of waiting attempts
	// per key and hands a released key to its head (AcquireRequest.Queue;
	// the rules are in queue.go).
	Queue bool
	// Inline is true when no call ever waits on I/O (the memory store): the
	// engine then calls the backend on its own actors instead of on a
	// goroutine, which a call that may block would stall for every lease.
	Inline bool
	// Batches is true when Batch makes several calls in one round trip: the
	// engine then coalesces the calls that are ready together instead of
	// making one round trip each.
	Batches bool
	// AnnouncesReleases is true when WatchReleases announces releases: the
	// engine then keeps one watch, so that waiters wake at once instead of
	// polling often.
	AnnouncesReleases bool
	// HandOffNotices is true when WatchHandOffs delivers the store's hand-off
	// notices: the engine then, on a Queue store, watches its own address,
	// so that a waiter handed a key learns it at once instead of at its next
	// poll.
	HandOffNotices bool
	// Sharded is true when the store is several servers that answer
	// independently, each for its own keys (Shard names them): the engine
	// then never puts calls of different shards in one round trip, so that a
	// shard that stops answering delays only the calls on its keys.
	Sharded bool
	// TTLUnit, when not 0, is the granularity of the TTLs the store keeps
	// (etcd: a second), and MinTTL, when above backend.MinTTL, the shortest.
	// A backend declares here every TTL limit of its own: the engine checks
	// an Acquire's and a Renew's TTL against them (CheckTTL) before anything
	// changes, so that a TTL the store would refuse never shortens a lease.
	TTLUnit time.Duration
	MinTTL  time.Duration
	// MaxLimit is the largest AcquireRequest.Limit the store grants (at
	// most backend.MaxLimit; 0 or 1: exclusive holdings only). The engine
	// refuses a larger limit before any call, and so does the store itself
	// (Info.CheckLimit), for a caller that is not the engine (the rules:
	// limit.go).
	MaxLimit int
}

// Backend is a lease store. Implementations must be safe for concurrent use.
//
// Every backend has every method. Acquire, Renew, RenewBatch, Release,
// Inspect, Holders, List, Revoke and Close are what every store does; Batch,
// WatchReleases, WatchHandOffs and Shard are what a store may do well, and
// the engine uses them only when Info declares it (Batches,
// AnnouncesReleases, HandOffNotices, Sharded). A backend embeds Unsupported
// for those it lacks.
//
// # Holdings
//
// A grant is identified by the holding, not by the owner: every acquire
// attempt carries its own Attempt identity (the engine makes one per attempt,
// unique across processes), and the store remembers it with the grant. Renew
// and Release name the holding they mean (Attempt and Token, plus Owner), so a
// late request about an old holding can never touch a newer one, not even the
// same owner's. Two Managers configured with the same owner are two
// contenders, never one holder.
//
// # Tokens
//
// Tokens are fencing tokens: every new grant of a key gets a token strictly
// greater than every token ever issued for that key by this store, whatever
// failed in between (a restart, a lost write, a failover). Only a retry of
// the same attempt (the same Attempt, while its holding is live) gets its
// token again. Tokens are never 0.
//
// # Clocks
//
// Expiry is decided by the store's own clock. Timestamps in a Grant are on
// that clock and are for display only: the engine never compares them with
// its own clock. Durations (HolderExpiresIn) are what it acts on.
type Backend interface {
	Info() Info

	// Acquire grants Key to the attempt r.Attempt for TTL when the key is free
	// or expired: a new holding with a new, higher token. When the live
	// holding was made by the same Attempt (a retry after an ambiguous
	// failure), it is refreshed (new expiry, new metadata, same token), so the
	// retry is idempotent. Any other live holding, the same Owner's included,
	// makes the answer Grant{Acquired: false} with Holder, HolderToken,
	// HolderExpiresAt and HolderExpiresIn filled in, and a nil error: being
	// busy is not a fault.
	Acquire(ctx context.Context, r AcquireRequest) (Grant, error)

	// Renew extends the live holding named by r (Key, Owner, Attempt, Token)
	// to now+TTL on the store's clock. It returns an error wrapping ErrNotHeld
	// when that holding no longer exists (released, expired or replaced).
	Renew(ctx context.Context, r RenewRequest) (Grant, error)

	// Release ends the holding named by r (Key, Owner, Attempt and, unless it
	// is 0, Token). It returns nil also when no such holding exists: whatever
	// holds the key now is left alone. On a Queue store it also hands the
	// key to the head of its queue, or removes the attempt's own entry (see
	// queue.go).
	Release(ctx context.Context, r ReleaseRequest) error

	// RenewBatch renews every request and returns one result per request, in
	// order. A non-nil error means the batch as a whole could not be
	// confirmed; the engine then treats each lease as an unconfirmed renewal.
	// A store without batch round trips may renew one after another
	// (RenewEach).
	RenewBatch(ctx context.Context, rs []RenewRequest) ([]RenewResult, error)

	// Inspect returns the live holding of key; held is false when nobody
	// holds it (never granted, released or expired).
	Inspect(ctx context.Context, key string) (h Holder, held bool, err error)

	// Holders returns every live holding of key, in token order (none when
	// nobody holds it). A store of exclusive holdings only (Info.MaxLimit
	// below 2) can answer with HoldersFromInspect.
	Holders(ctx context.Context, key string) ([]Holder, error)

	// List calls fn with every live holding whose key starts with prefix
	// ("" lists all), until fn returns false, without blocking the store
	// (SCAN on Redis, an index range on SQL). The order is the store's.
	List(ctx context.Context, prefix string, fn func(Holder) bool) error

	// Revoke lets an operator end a holding by force: it ends the live
	// holding of key when its token is token (0: whichever holding is live)
	// and returns what it removed; removed is false when there was no such
	// holding. The holder is fenced: its next renewal is rejected
	// (ErrNotHeld), so it learns of the loss with ReasonRejected, and its
	// token is never issued again. Waiters are notified as after a release,
	// and a Queue store hands the key on (see queue.go).
	//
	// The answer is about this call, across every send of it: a backend
	// that sends a revoke again after its answer was lost (a retry of its
	// own or of its client) and then finds no such holding must find out
	// whether the earlier send removed it, and answer removed true with that
	// holding if so. When it cannot tell, it returns an error wrapping
	// ErrRevokeUnconfirmed, never removed false: removed false with a nil
	// error means that no send of this call removed anything.
	Revoke(ctx context.Context, key string, token uint64) (h Holder, removed bool, err error)

	// Batch (when Info says Batches) makes every call in calls and fills in
	// each one's Grant and Err, exactly as the single call (Acquire, Renew,
	// Release) would have answered it: a call that breaks the request limits
	// gets ErrInvalidRequest and the others still run. Calls on the same key
	// run in slice order. ctx bounds the whole batch; when the round trip
	// fails, every call it carried gets the error (as an ambiguous single
	// call would: it may have been applied). The engine coalesces the calls
	// that are ready at the same moment, never holding a lone call back to
	// wait for company, and hands them to Batch.
	Batch(ctx context.Context, calls []Call)

	// WatchReleases (when Info says AnnouncesReleases) calls fn with the key
	// of every release made through the store, by any owner in any process,
	// until ctx ends. It reconnects by itself after failures (a notification
	// may be lost meanwhile; waiters also wake at the holder's expiry) and
	// returns when ctx ends. fn must not block. An error wrapping
	// errors.ErrUnsupported means the store announces nothing (after all):
	// waiters poll.
	WatchReleases(ctx context.Context, fn func(key string)) error

	// WatchHandOffs (when Info says HandOffNotices) calls fn with every
	// HandOff sent to addr until ctx ends, reconnecting by itself after
	// failures, and returns when ctx ends. fn must not block. ready, when not
	// nil, is called each time the watch is (again) in place: a HandOff sent
	// before that may be lost. Notices are at most once (see HandOff).
	WatchHandOffs(ctx context.Context, addr string, fn func(HandOff), ready func()) error

	// Shard (when Info says Sharded) names the shard that serves key now, or
	// "" when the backend cannot tell yet (calls of shard "" travel
	// together, as on a store without shards). It must not wait on I/O: the
	// engine calls it on its actors.
	Shard(key string) string

	// Close releases the backend's own resources (not the leases, and not
	// clients that were handed to its constructor).
	Close() error
}

// AcquireRequest asks for Key on behalf of Owner, as one acquire attempt.
type AcquireRequest struct {
	Key   string
	Owner string
	// Attempt identifies this attempt: the holding it may create is the
	// attempt's. The engine reuses it only to retry the same attempt.
	Attempt  string
	TTL      time.Duration
	Metadata string
	// Wait says the caller will wait for Key if this attempt is refused. A
	// store that announces releases may announce only the releases of keys
	// that a refused waiting attempt marked (no announcement costs anything
	// when nobody waits); it must announce those.
	Wait bool
	// Queue, on a store whose Info says Queue, keeps this attempt in the
	// key's waiter queue while it is refused (only with Wait).
	Queue QueueRequest
	// Limit is how many live holdings the key may have at once (0 or 1: an
	// exclusive holding). Only a store whose Info.MaxLimit is at least
	// Limit is sent a Limit above 1 (limit.go).
	Limit int
}

// RenewRequest extends one holding.
type RenewRequest struct {
	Key     string
	Owner   string
	Attempt string
	Token   uint64
	TTL     time.Duration
}

// ReleaseRequest ends one holding. Token 0 means "the holding Attempt made,
// whatever its token": the engine uses it to clean up after an acquire whose
// answer it never saw. It can only match that attempt's own holding.
type ReleaseRequest struct {
	Key     string
	Owner   string
	Attempt string
	Token   uint64
}

// Grant is the outcome of Acquire or Renew.
type Grant struct {
	// Acquired reports whether the caller holds the key now.
	Acquired bool
	// Token is the fencing token of the caller's holding (when Acquired).
	Token uint64
	// ExpiresAt is the caller's expiry on the store's clock (when Acquired).
	ExpiresAt time.Time

	// When not Acquired, the holding that stood in the way:
	//
	// Holder is its owner, HolderToken its token.
	Holder      string
	HolderToken uint64
	// HolderExpiresAt is when it ends, on the store's clock (for display).
	HolderExpiresAt time.Time
	// HolderExpiresIn is how long it had left when the store answered, as
	// the store measured it. The engine times its retries with this, never
	// with HolderExpiresAt, so a store clock that disagrees with the local
	// one does not change how often waiters poll.
	HolderExpiresIn time.Duration
	// Queued reports, when not Acquired, that the attempt has an entry in
	// the key's waiter queue after this call (a Queue store, a request with
	// AcquireRequest.Queue, a queue not full).
	Queued bool
	// HeldLimit, when not Acquired and not 0, is the limit the key's live
	// holdings were granted under, which differs from the request's: the
	// store refused the attempt for that alone, queued nothing and changed
	// nothing (limit.go).
	HeldLimit int
}

// ErrNotHeld is returned (wrapped) by Renew when the holding no longer exists.
var ErrNotHeld = errors.New("lease not held by this holding")

// ErrInvalidRequest is returned (wrapped) for a request that breaks the limits
// below; the store is left untouched.
var ErrInvalidRequest = errors.New("invalid lease request")
