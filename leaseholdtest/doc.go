// Package leaseholdtest is the Manager conformance suite: the semantics
// matrix of the product (busy, waits, cancellation, bad input rejected before
// any backend call, loss by expiry or rejection, fencing, no re-entry,
// contention between owners, Close, health, metrics, and the identity of
// holdings) checked through leasehold Managers on a backend. A backend runs it
// beside the Backend contract of package backendtest:
//
//	func TestConformance(t *testing.T) {
//		newBackend := func(t *testing.T) backend.Backend { return newBackend(t) }
//		backendtest.Run(t, newBackend)
//		leaseholdtest.Run(t, newBackend)
//	}
//
// The rows are Manager/…, Observe/… and Identity/…, beside backendtest's
// Backend/… and Inspect/…, so that one TestConformance lists them all. Every
// subtest uses keys of its own, so the suite can run against a shared server.
// Faults are injected with backendtest.Faulty, which knows only the Backend
// interface.
package leaseholdtest
