package messages

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
)

// Lease actor → registry.

// Idle says the lease actor holds nothing and has no waiters after handling
// Handled commands from the registry. The registry stops it only if it has
// forwarded exactly that many, so no command is ever lost to a stopping actor.
type Idle struct {
	Key     string
	Handled uint64
	From    *actor.PID
}

// LeaseStopped says a lease actor has stopped (lease actors are not protoactor
// children of the registry; see actors.registry).
type LeaseStopped struct {
	Key string
	PID *actor.PID
}

// ShutdownDone says a lease actor has answered its waiters and released its
// holding after Shutdown.
type ShutdownDone struct{ Key string }

// Backend actor → registry → lease actor.

// ReleaseNotice says some owner released Key; waiters retry at once.
type ReleaseNotice struct{ Key string }

// Lease actor → itself. Gen matches the timer's generation; a tick from a
// cancelled or re-armed timer carries an old generation and is ignored.

// HoldTick: one timer per holding, armed for the earlier of the next
// renewal and the local deadline.
type HoldTick struct{ Gen uint64 }
type RetryTick struct{ Gen uint64 }
type WaitTimeout struct{ Ticket *Ticket }

// Registry → itself: time to stop the lease actors that stayed idle since
// the last sweep.
type SweepTick struct{ Gen uint64 }

// Backend actor → itself: time to send the renewals waiting for a batch.
type FlushTick struct{ Gen uint64 }

// Lease actor → backend actor. Seq is echoed in the result so the lease actor
// can match it. Ctx bounds the call (the backend actor also cancels it when it
// stops).

type BackendAcquire struct {
	Seq     uint64
	Req     backend.AcquireRequest
	Ctx     context.Context
	ReplyTo *actor.PID
}

type BackendRenew struct {
	Seq      uint64
	Req      backend.RenewRequest
	Deadline time.Time // the lease's local deadline: an answer after it is useless
	// MaxDelay is how long the renewal may wait to join a batch.
	MaxDelay time.Duration
	ReplyTo  *actor.PID
}

type BackendRelease struct {
	Seq     uint64
	Req     backend.ReleaseRequest
	Ctx     context.Context
	ReplyTo *actor.PID
}

// Backend actor → lease actor.

type AcquireResult struct {
	Seq   uint64
	Grant backend.Grant
	Err   error
}

type RenewResult struct {
	Seq   uint64
	Grant backend.Grant
	Err   error
}

type ReleaseResult struct {
	Seq uint64
	Err error
}

// Lease actor → event hub.

// Publish hands a loss to the event hub for every subscriber.
type Publish struct{ Event Lost }

func (*Idle) IgnoreDeadLetterLogging()           {}
func (*ShutdownDone) IgnoreDeadLetterLogging()   {}
func (*LeaseStopped) IgnoreDeadLetterLogging()   {}
func (*ReleaseNotice) IgnoreDeadLetterLogging()  {}
func (*HoldTick) IgnoreDeadLetterLogging()       {}
func (*RetryTick) IgnoreDeadLetterLogging()      {}
func (*WaitTimeout) IgnoreDeadLetterLogging()    {}
func (*SweepTick) IgnoreDeadLetterLogging()      {}
func (*BackendAcquire) IgnoreDeadLetterLogging() {}
func (*BackendRenew) IgnoreDeadLetterLogging()   {}
func (*FlushTick) IgnoreDeadLetterLogging()      {}
func (*BackendRelease) IgnoreDeadLetterLogging() {}
func (*AcquireResult) IgnoreDeadLetterLogging()  {}
func (*RenewResult) IgnoreDeadLetterLogging()    {}
func (*ReleaseResult) IgnoreDeadLetterLogging()  {}
func (*Publish) IgnoreDeadLetterLogging()        {}
