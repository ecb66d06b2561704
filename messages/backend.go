package messages

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
)

// Lease actor → backend actor → lease actor: one backend call each. Seq is
// echoed in the result, so the lease actor can tell the answer to its current
// request from a late one. (An Immediate backend is called by the lease actor
// itself, with the same messages, queued rather than sent.)

// BackendAcquire asks the backend for a grant. Ctx is the waiting caller's:
// its end cancels the call (the backend actor also cancels every call in
// flight at Shutdown, and every call when it stops).
type BackendAcquire struct {
	Seq     uint64
	Req     backend.AcquireRequest
	Ctx     context.Context
	ReplyTo *actor.PID
}

// BackendRenew asks for a renewal. The backend actor may batch it with others
// (for a backend.BatchRenewer), holding it at most MaxDelay.
type BackendRenew struct {
	Seq      uint64
	Req      backend.RenewRequest
	Deadline time.Time // the lease's local deadline: an answer after it is useless
	MaxDelay time.Duration
	ReplyTo  *actor.PID
}

// BackendRelease asks for a release. It never carries a caller's context: a
// release runs detached from whoever asked for it (a caller of Lease.Release
// who stops waiting does not stop the release), bounded by the engine's own
// timeout, so that no holding is left behind because a context ended.
type BackendRelease struct {
	Seq     uint64
	Req     backend.ReleaseRequest
	ReplyTo *actor.PID
}

// AcquireResult answers BackendAcquire.
type AcquireResult struct {
	Seq   uint64
	Grant backend.Grant
	Err   error
}

// RenewResult answers BackendRenew (also when it went in a batch).
type RenewResult struct {
	Seq   uint64
	Grant backend.Grant
	Err   error
}

// ReleaseResult answers BackendRelease.
type ReleaseResult struct {
	Seq uint64
	Err error
}

// FlushTick (backend actor → itself): time to send the renewals waiting for a
// batch.
type FlushTick struct{ Gen uint64 }

func (*BackendAcquire) IgnoreDeadLetterLogging() {}
func (*BackendRenew) IgnoreDeadLetterLogging()   {}
func (*BackendRelease) IgnoreDeadLetterLogging() {}
func (*AcquireResult) IgnoreDeadLetterLogging()  {}
func (*RenewResult) IgnoreDeadLetterLogging()    {}
func (*ReleaseResult) IgnoreDeadLetterLogging()  {}
func (*FlushTick) IgnoreDeadLetterLogging()      {}
