// Package backend defines the contract between the leasehold engine and a
// lease store (Redis, SQL Server, PostgreSQL, etcd, or the in-process memory
// store).
//
// A Backend is one interface, deliberately plain: acquire, renew and release
// of one key, each one atomic step on the store, with expiry decided by the
// store's clock, plus the batch renewal and the operator's calls (Inspect,
// List, Revoke) every store can make. The engine (package leasehold and its
// actors) adds everything else: waiting, auto-renewal, local deadlines, loss
// events.
//
// What a store may do well besides (several calls in one round trip, release
// announcements, hand-off notices, shards, calls that never wait) are methods
// of the same interface whose use Info declares (Batches, AnnouncesReleases,
// HandOffNotices, Sharded, Inline). The engine decides from Info alone; a
// backend embeds Unsupported for the methods its store lacks. A store that
// keeps a queue of waiters and hands a released key to the first (queue.go)
// says so in Info.Queue.
//
// Wrap a backend with Wrap and a Middleware (for metrics, logging, fault
// injection): every round trip of lease traffic, batches included, goes
// through the middleware, and the wrapper keeps what the backend it wraps
// declares (Inline only for a non-blocking middleware).
//
// Every backend must pass the conformance suites: package backendtest (this
// contract) and package leaseholdtest (the Manager's semantics on it).
package backend
