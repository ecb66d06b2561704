package messages

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// WaitForever as Acquire.Wait waits until the caller's context ends (the
// value package leasehold exports for WithWait).
const WaitForever = lease.WaitForever

// Acquire asks for the lease on Key. It is a waiter: it joins the lease actor's
// FIFO queue and is answered exactly once on Reply, unless the caller abandons
// its Ticket first.
type Acquire struct {
	Name       string // as given by the user (Key is the physical key)
	Key        string
	TTL        time.Duration
	RenewEvery time.Duration // 0 with AutoRenew false
	AutoRenew  bool
	Metadata   string
	// Wait: 0 one attempt; >0 wait up to this long; WaitForever until Ctx ends.
	Wait time.Duration
	// Limit is how many holdings of Key may be live at once (0 or 1:
	// exclusive). An Acquire with a Limit above 1 must be sent to a lease
	// actor of its own, under a route key made with actors.RouteKey: each holding
	// of such a key is its own actor's.
	Limit  int
	Ctx    context.Context // the caller's; its end abandons the wait
	Ticket *Ticket
	Reply  chan<- AcquireReply
}

// AcquireReply answers Acquire: a Holding, or an error. When the lease is busy
// Err is ErrNotAcquired and Holder / HolderExpiresAt say who has it.
type AcquireReply struct {
	Holding         *Holding
	Err             error
	Holder          string
	HolderExpiresAt time.Time
	// HeldHere: the refusal is because this Manager holds the key itself
	// (a lease is not re-entrant).
	HeldHere bool
}

// CancelWait tells the lease actor that the caller behind Ticket gave up, so
// that it leaves the queue now rather than at its deadline.
type CancelWait struct {
	Key    string
	Ticket *Ticket
}

// Renew extends the holding (Key, Token). TTL 0 keeps the holding's TTL.
// Reply gets nil, ErrStale, ErrNotHeld-wrapped loss, or an unconfirmed error.
type Renew struct {
	Key   string
	Token uint64
	TTL   time.Duration
	Reply chan<- error
}

// StopRenewing turns automatic renewal off for the holding (Key, Token): the
// renewal scheduled is taken back (one already sent is still answered), and
// the holding then ends at its local deadline unless renewed or released.
// Reply gets nil, or ErrStale when the holding has ended.
type StopRenewing struct {
	Key   string
	Token uint64
	Reply chan<- error
}

// Release ends the holding (Key, Token). A holding that has already ended is
// answered nil without any backend call. The backend call runs detached from
// the caller (see BackendRelease); the caller waits for Reply as long as its
// own context allows. A release that fails is remembered and retried (see the
// lease actor's unconfirmed releases).
type Release struct {
	Key   string
	Token uint64
	Reply chan<- error
}

// Shutdown (Manager.Close → registry → backend actor, then every lease
// actor) ends the Manager's work: the backend actor cancels every call in
// flight and runs the calls that follow under Ctx (Close's context, each call
// also bounded by the engine's release timeout); each lease actor answers its
// waiters with ErrClosed, ends its holding as released and releases it once.
// Reply is closed when every lease actor is done. The registry sends it to
// the backend actor first, so that no release made for Shutdown is cancelled
// as a call that was in flight before it.
type Shutdown struct {
	Ctx   context.Context
	Reply chan struct{}
}

// IgnoreDeadLetterLogging marks every message of the protocol: one that
// reaches a stopped actor (a late tick, a result after a forced stop) is
// expected, not news.
func (*Acquire) IgnoreDeadLetterLogging()      {}
func (*CancelWait) IgnoreDeadLetterLogging()   {}
func (*Renew) IgnoreDeadLetterLogging()        {}
func (*StopRenewing) IgnoreDeadLetterLogging() {}
func (*Release) IgnoreDeadLetterLogging()      {}
func (*Shutdown) IgnoreDeadLetterLogging()     {}
