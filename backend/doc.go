// Package backend defines the contract between the leasehold engine and a
// lease store (Redis, SQL Server, PostgreSQL, or the in-process memory store).
//
// A Backend is deliberately small: acquire, renew and release of one key, each
// one atomic step on the store, with expiry decided by the store's clock. The
// engine (package leasehold and its actors) adds everything else: waiting,
// auto-renewal, local deadlines, loss events. Optional capabilities are extra
// interfaces in this package (ReleaseWatcher, BatchRenewer, Batcher,
// Inspector, Lister, Revoker, Immediate, HandOffWatcher, Sharder); the engine
// discovers them with a type assertion, so a backend implements only what its
// store can do well. A store that keeps a queue of waiters and hands a
// released key to the first (queue.go) says so in Info.Queue.
//
// A wrapper that embeds a Backend (for metrics, logging, fault injection)
// hides those capabilities: the engine would lose release notifications and
// batching through it. Wrap a backend with Wrap and a Middleware instead: the
// result has exactly the capabilities of the backend it wraps, and every
// round trip of lease traffic, batches included, goes through the
// middleware. (Every wrapper is also a Sharder, answering "" for a backend
// without shards, which means the same as no Sharder.)
//
// Every backend must pass the conformance suites: package backendtest (this
// contract) and package leaseholdtest (the Manager's semantics on it).
package backend
