package protocol

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
)

// Lease actor → backend actor → lease actor: one backend call each. Seq is
// echoed in the result, so the lease actor can tell the answer to its current
// request from a late one. (An Inline backend is called by the lease actor
// itself, and its result handled as if it had come back through the mailbox.)

// BackendCall asks for one backend call. The backend actor coalesces the
// calls that are ready at the same moment into one round trip on a backend
// whose Info says Batches; every call is answered on its own.
//
// An acquire carries the waiting caller's Ctx: its end cancels the call when
// it runs alone. A renewal carries the lease's local Deadline: an answer after
// it is useless. A release carries neither: it runs detached from whoever asked
// for it (a caller of Lease.Release who stops waiting does not stop the
// release), bounded by the engine's own timeout, so that no holding is left
// behind because a context ended. The backend actor cancels every call in
// flight at Shutdown, and every call when it stops.
type BackendCall struct {
	Seq      uint64
	Call     backend.Call
	Ctx      context.Context
	Deadline time.Time
	ReplyTo  *actor.PID
}

// BackendResult answers a BackendCall (also one that went in a batch).
// Routed: it came through the router, as the renewer's answers do (they may
// wake a sleeping lease), not straight from the backend actor.
type BackendResult struct {
	Seq    uint64
	Op     backend.Op
	Grant  backend.Grant
	Err    error
	Routed bool
}

// IgnoreDeadLetterLogging marks the message as expected at a stopped actor
// (see the package doc).
func (*BackendCall) IgnoreDeadLetterLogging()   {}
func (*BackendResult) IgnoreDeadLetterLogging() {}
