package protocol

import (
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/lease"
)

// ReleaseNotice (backend actor → lease actor, routed by key) says some owner, in
// any process, released Key: its head waiter retries at once.
type ReleaseNotice struct{ Key string }

// HandOffNotice (backend actor → lease actor, routed by key) says the store
// handed the key to one of this Manager's queued attempts when its holder
// released it: the waiter of that attempt holds it now (for the pickup
// window, until it renews). A waiter that left has released it already.
type HandOffNotice struct{ HandOff backend.HandOff }

// Publish (lease actor → event hub) hands a loss to every subscriber.
type Publish struct{ Event lease.Lost }

// IgnoreDeadLetterLogging marks the message as expected at a stopped actor
// (see the package doc).
func (*ReleaseNotice) IgnoreDeadLetterLogging() {}
func (*HandOffNotice) IgnoreDeadLetterLogging() {}
func (*Publish) IgnoreDeadLetterLogging()       {}
