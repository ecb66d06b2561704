package protocol

import "github.com/leasehold/leasehold/internal/lease"

// Timer ticks of a lease actor (its own scheduler.SendOnce timers, and its
// holding's alarm). Gen is the generation the timer was armed with; a tick
// from a timer that was cancelled or re-armed since carries an older
// generation and is ignored, so a late tick can never act on newer state.

// HoldTick (alarms → lease actor, routed: it wakes a sleeping lease): the
// holding's local deadline came unrenewed (its renewals are the renewer's).
type HoldTick struct{ Gen uint64 }

// RetryTick: time for the head waiter to try again (poll backoff, bounded by
// the holder's expiry).
type RetryTick struct{ Gen uint64 }

// ReleaseRetryTick: time to send an unconfirmed release again.
type ReleaseRetryTick struct{ Gen uint64 }

// WaitTimeout: the wait of the Acquire behind Ticket has run out.
type WaitTimeout struct{ Ticket *lease.Ticket }

// IgnoreDeadLetterLogging marks the message as expected at a stopped actor
// (see the package doc).
func (*HoldTick) IgnoreDeadLetterLogging()         {}
func (*RetryTick) IgnoreDeadLetterLogging()        {}
func (*WaitTimeout) IgnoreDeadLetterLogging()      {}
func (*ReleaseRetryTick) IgnoreDeadLetterLogging() {}
