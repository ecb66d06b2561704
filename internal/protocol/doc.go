// Package protocol is what the engine's own actors say to each other: the
// messages that never leave the engine, beside the commands of package
// messages, which are what the engine takes from outside. Reading the two
// top to bottom tells the whole conversation:
//
//	public API ──commands (package messages, routed by key)──▶ lease actor (one per key)
//	lease actor ──BackendCall──▶ backend actor ──BackendResult──▶ lease actor
//	renewer ──the renewals due──▶ backend's call workers ──a refusal, a failure──▶ BackendResult
//	        to the lease actor, routed (a confirmed automatic renewal is written to its
//	        holding there: no message)
//	alarms ──HoldTick (routed)──▶ lease actor: its holding's local deadline
//	lease actor ──ticks──▶ itself (retry, unconfirmed release, wait timeout)
//	backend actor ──ReleaseNotice (routed by key)──▶ lease actor (wakes waiters)
//	backend actor ──HandOffNotice (routed by key)──▶ lease actor (its waiter holds)
//	lease actor ──Publish──▶ event hub ──▶ subscribers (never blocks)
//	Manager ──Subscribe / Unsubscribe──▶ event hub
//	Manager.Close ──Shutdown──▶ registry ──▶ backend actor, every lease actor
//	lease actor ──ShutdownDone / LeaseStopped──▶ registry
//
// "Routed" messages find their lease actor through the engine's router, which
// wakes a sleeping lease for them; the others go to an actor's PID.
//
// The files: backend.go (backend calls and their results), ticks.go
// (timers), notices.go (release and hand-off notices, loss events on their
// way to the hub), lifecycle.go (how lease actors come and go, and the hub's
// subscribers).
//
// Every message implements actor.IgnoreDeadLetterLogging: a tick or a late
// backend result that reaches a stopped actor is expected, not news.
package protocol
