package messages

// ReleaseNotice (backend actor → registry → lease actor) says some owner, in
// any process, released Key: its head waiter retries at once.
type ReleaseNotice struct{ Key string }

// Publish (lease actor → event hub) hands a loss to every subscriber.
type Publish struct{ Event Lost }

func (*ReleaseNotice) IgnoreDeadLetterLogging() {}
func (*Publish) IgnoreDeadLetterLogging()       {}
