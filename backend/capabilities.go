package backend

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// ReleaseWatcher is implemented by backends that can announce releases (Redis
// pub/sub, PostgreSQL LISTEN/NOTIFY), so that waiters wake at once instead of
// polling. The engine keeps one watch per Manager.
type ReleaseWatcher interface {
	// WatchReleases calls fn with the key of every release made through the
	// store, by any owner in any process, until ctx ends. It reconnects by
	// itself after failures (a notification may be lost meanwhile; waiters
	// also wake at the holder's expiry) and returns when ctx ends. fn must not
	// block.
	WatchReleases(ctx context.Context, fn func(key string)) error
}

// BatchRenewer is implemented by backends that can renew many holdings in one
// round trip.
type BatchRenewer interface {
	// RenewBatch renews every request and returns one result per request, in
	// order. A non-nil error means the batch as a whole could not be confirmed;
	// the engine then treats each lease as an unconfirmed renewal.
	RenewBatch(ctx context.Context, rs []RenewRequest) ([]RenewResult, error)
}

// RenewResult is the outcome of one renewal in a batch: a Grant, or an error
// wrapping ErrNotHeld.
type RenewResult struct {
	Grant Grant
	Err   error
}

// Sharder is implemented by backends whose store is several servers that
// answer independently, each for its own keys (the masters of a Redis
// Cluster). The engine then never puts calls of different shards in one
// round trip, and gives each shard round trips of its own: a shard that stops
// answering delays only the calls on its keys, and the others' answers reach
// their leases as soon as they come.
type Sharder interface {
	// Shard names the shard that serves key now, or "" when the backend
	// cannot tell yet (calls of shard "" travel together, as without a
	// Sharder). It must not wait on I/O: the engine calls it on its actors.
	Shard(key string) string
}

// Batcher is implemented by backends that can make several calls in one
// round trip (a Redis pipeline, a PostgreSQL batch). The engine coalesces the
// calls that are ready at the same moment, never holding a lone call back to
// wait for company, and hands them to Batch.
type Batcher interface {
	// Batch makes every call in calls and fills in each one's Grant and Err,
	// exactly as the single call (Acquire, Renew, Release) would have
	// answered it: a call that breaks the request limits gets
	// ErrInvalidRequest and the others still run. Calls on the same key run
	// in slice order. ctx bounds the whole batch; when the round trip fails,
	// every call it carried gets the error (as an ambiguous single call
	// would: it may have been applied).
	Batch(ctx context.Context, calls []Call)
}

// Op is what a Call asks for.
type Op uint8

// The calls a batch carries.
const (
	OpAcquire Op = iota + 1
	OpRenew
	OpRelease
)

func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "acquire"
	case OpRenew:
		return "renew"
	case OpRelease:
		return "release"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Call is one request of a batch and, once Batch returns, its answer. Op says
// which request field is meant.
type Call struct {
	Op      Op
	Acquire AcquireRequest
	Renew   RenewRequest
	Release ReleaseRequest

	// The answer: Grant for OpAcquire and OpRenew, Err for all three (as
	// the single call would return it).
	Grant Grant
	Err   error
}

// Immediate is implemented by backends whose calls never wait on I/O (the
// memory backend). The engine calls them inline instead of on a goroutine,
// so a wrapper that adds work which may wait (logging, metrics export, an
// injected delay) must not pass Immediate on: Wrap keeps it only for a
// Middleware declared NonBlocking.
type Immediate interface {
	Immediate()
}

// Holding describes the live holding of a key, as an operator or another
// owner sees it.
type Holding struct {
	Key   string
	Owner string
	Token uint64
	// ExpiresAt is the end of the holding on the store's clock (for display).
	ExpiresAt time.Time
	// ExpiresIn is the time it had left when the store answered, as the
	// store measured it.
	ExpiresIn time.Duration
	Metadata  string
}

// Inspector is implemented by every backend of this module (the conformance
// suite requires it): who holds a key now.
type Inspector interface {
	// Inspect returns the live holding of key; held is false when nobody
	// holds it (never granted, released or expired).
	Inspect(ctx context.Context, key string) (h Holding, held bool, err error)
}

// Lister is implemented by backends that can list live holdings by key prefix
// without blocking the store (SCAN on Redis, an index range on SQL).
type Lister interface {
	// List calls fn with every live holding whose key starts with prefix
	// ("" lists all), until fn returns false. The order is the store's.
	List(ctx context.Context, prefix string, fn func(Holding) bool) error
}

// Revoker is implemented by backends that let an operator end a holding by
// force. The holder is fenced: its next renewal is rejected (ErrNotHeld), so
// it learns of the loss with ReasonRejected, and its token is never issued
// again. Waiters are notified as after a release.
type Revoker interface {
	// Revoke ends the live holding of key when its token is token (0:
	// whichever holding is live) and returns what it removed; removed is
	// false when there was no such holding.
	//
	// The answer is about this call, across every send of it: a backend
	// that sends a revoke again after its answer was lost (a retry of its
	// own or of its client) and then finds no such holding must find out
	// whether the earlier send removed it, and answer removed true with that
	// holding if so. When it cannot tell, it returns an error wrapping
	// ErrRevokeUnconfirmed, never removed false: removed false with a nil
	// error means that no send of this call removed anything.
	Revoke(ctx context.Context, key string, token uint64) (h Holding, removed bool, err error)
}

// ErrRevokeUnconfirmed is returned (wrapped) by Revoke when the answer to a
// send was lost and the holding was gone when the revoke looked again: this
// call may have removed it, or it ended otherwise meanwhile.
var ErrRevokeUnconfirmed = errors.New("revoke unconfirmed: its answer was lost and the holding is gone")
