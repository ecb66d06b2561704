// Package messages is the actor protocol of leasehold, written down in one
// place: what the engine of package actors takes (the commands, sent with
// actors.Engine.Send from any goroutine, a user's own protoactor-go actors
// included) and what its actors say to each other. Reading this package top
// to bottom tells the whole conversation:
//
//	public API ──commands (routed by key)──▶ lease actor (one per key)
//	lease actor ──BackendCall──▶ backend actor ──BackendResult──▶ lease actor
//	renewer ──the renewals due──▶ backend's call workers ──a refusal, a failure──▶ BackendResult to the lease actor
//	        (a confirmed automatic renewal is written to its holding there: no message)
//	lease actor ──ticks──▶ itself (local deadline, retry, wait timeout)
//	backend actor ──ReleaseNotice (routed by key)──▶ lease actor (wakes waiters)
//	backend actor ──HandOffNotice (routed by key)──▶ lease actor (its waiter holds)
//	lease actor ──Publish──▶ event hub ──▶ subscribers (never blocks)
//	Manager.Close ──Shutdown──▶ registry ──▶ backend actor, every lease actor
//	lease actor ──ShutdownDone / LeaseStopped──▶ registry
//
// Commands reach a lease actor without passing through a shared mailbox: the
// engine's router looks the key up and sends to the actor itself.
//
// The files: commands.go (what the public API sends), backend.go (backend
// calls and their results), ticks.go (timers), notices.go (release notices,
// loss events on their way to the hub), lifecycle.go (how lease actors come
// and go), errors.go (the outcomes the protocol reports), state.go (the
// state the messages carry, shared outside the message flow: the Holding, the
// Ticket that settles a grant racing a caller who gives up, the subscriber's
// Sink and the Lost event).
//
// The package has no variables: its errors are constants of type Error,
// matched with errors.Is (package leasehold's sentinel errors are the same
// values), and every type the engine defines elsewhere is named here by an
// alias, so that it is one type wherever it is used.
//
// Commands from the public API carry a reply channel (buffered, size 1) rather
// than using protoactor futures: the caller selects on it and on its context,
// and no actor ever blocks on a reply.
//
// Every message implements actor.IgnoreDeadLetterLogging: a tick or a late
// backend result that reaches a stopped actor is expected, not news.
package messages
