// Package memory is the in-process lease store: the embedded default of
// leasehold, for a single process, tests and examples.
//
// It keeps the full semantics of every other backend (expiry on its own
// monotonic clock, fencing tokens, idempotent re-acquire, release
// notifications) so that code written against it behaves the same on Redis or
// SQL. Leases are visible only inside the process (Info().ProcessLocal).
package memory
