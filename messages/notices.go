package messages

import "github.com/leasehold/leasehold/internal/lease"

// ReleaseNotice (backend actor → lease actor, routed by key) says some owner, in
// any process, released Key: its head waiter retries at once.
type ReleaseNotice struct{ Key string }

// Publish (lease actor → event hub) hands a loss to every subscriber.
type Publish struct{ Event lease.Lost }

func (*ReleaseNotice) IgnoreDeadLetterLogging() {}
func (*Publish) IgnoreDeadLetterLogging()       {}
