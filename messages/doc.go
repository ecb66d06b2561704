// Package messages is the actor protocol of leasehold, written down in one
// place. Reading this package top to bottom tells the whole conversation:
//
//	public API ──commands──▶ registry ──forward──▶ lease actor (one per key)
//	lease actor ──Backend*──▶ backend actor ──*Result──▶ lease actor
//	lease actor ──ticks──▶ itself (renew, local deadline, retry, wait timeout)
//	backend actor ──ReleaseNotice──▶ registry ──▶ lease actor (wakes waiters)
//	lease actor ──Publish──▶ event hub ──▶ subscribers (never blocks)
//	lease actor ──Idle / ShutdownDone──▶ registry
//
// Commands from the public API carry a reply channel (buffered, size 1) rather
// than using protoactor futures: the caller selects on it and on its context,
// and no actor ever blocks on a reply.
//
// Every message implements actor.IgnoreDeadLetterLogging: a tick or a late
// backend result that reaches a stopped actor is expected, not news.
package messages
