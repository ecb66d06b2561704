package messages

import "github.com/asynkron/protoactor-go/actor"

// Lease actor → registry: how lease actors come and go.

// Idle says the lease actor holds nothing and has no waiters after handling
// Handled commands from the registry. The registry stops it (at its next idle
// sweep) only if it has forwarded exactly that many, so no command is ever
// lost to a stopping actor.
type Idle struct {
	Key     string
	Handled uint64
	From    *actor.PID
}

// LeaseStopped says a lease actor has stopped. Lease actors are spawned from
// the root, not as protoactor children of the registry (whose child set would
// keep stopped actors in memory), so they report their own end.
type LeaseStopped struct {
	Key string
	PID *actor.PID
}

// ShutdownDone says a lease actor has answered its waiters and released its
// holding after Shutdown.
type ShutdownDone struct{ Key string }

// SweepTick (registry → itself): time to stop the lease actors that stayed
// idle for a whole sweep period.
type SweepTick struct{ Gen uint64 }

func (*Idle) IgnoreDeadLetterLogging()         {}
func (*LeaseStopped) IgnoreDeadLetterLogging() {}
func (*ShutdownDone) IgnoreDeadLetterLogging() {}
func (*SweepTick) IgnoreDeadLetterLogging()    {}
