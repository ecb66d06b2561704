// Package backendtest is the conformance suite every leasehold backend runs:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) backend.Backend { return newBackend(t) })
//	}
//
// Run drives the backend directly (the Backend contract) and through Managers
// (the semantics matrix of the product: busy, waits, cancellation, bad input
// rejected before any backend call, loss by expiry or rejection, fencing,
// no re-entry, contention between owners, Close). Every subtest uses keys of
// its own, so a suite can run against a shared server.
//
// It also offers Faulty, a wrapper that counts calls and injects faults into
// any backend, and helpers that find the test services (Redis, PostgreSQL).
package backendtest
