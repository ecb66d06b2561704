package protocol

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/internal/lease"
)

// Lease actor → registry: how lease actors come and go. (Idleness needs no
// message: a lease actor records it where the router's sweep reads it.)

// LeaseStopped says a lease actor has stopped (retired, stopped by Close, or
// after a panic).
type LeaseStopped struct{ PID *actor.PID }

// ShutdownDone says a lease actor has answered its waiters and released its
// holding after Shutdown.
type ShutdownDone struct{ PID *actor.PID }

// SweepTick (registry → itself): time to retire the lease actors that stayed
// idle for a whole sweep period.
type SweepTick struct{ Gen uint64 }

// IgnoreDeadLetterLogging marks the message as expected at a stopped actor
// (see the package doc).
func (*LeaseStopped) IgnoreDeadLetterLogging() {}
func (*ShutdownDone) IgnoreDeadLetterLogging() {}
func (*SweepTick) IgnoreDeadLetterLogging()    {}

// Subscribe (Manager → event hub) adds a subscriber.
type Subscribe struct{ Sink *lease.Sink }

// Unsubscribe (Manager → event hub) removes a subscriber; the hub closes it.
type Unsubscribe struct{ Sink *lease.Sink }

// IgnoreDeadLetterLogging marks the message as expected at a stopped actor.
func (*Subscribe) IgnoreDeadLetterLogging()   {}
func (*Unsubscribe) IgnoreDeadLetterLogging() {}
