// Package backendtest is the conformance suite of the Backend contract, which
// every leasehold backend runs:
//
//	func TestConformance(t *testing.T) {
//		newBackend := func(t *testing.T) backend.Backend { return newBackend(t) }
//		backendtest.Run(t, newBackend)
//		leaseholdtest.Run(t, newBackend) // the Manager's semantics on it
//	}
//
// Run drives the backend directly, through the Backend interface only
// (acquire, renew, release, attempts, tokens, expiry, validation, keys,
// release notifications, Inspect, List, Revoke, and that Info declares what
// the optional methods do); the Manager's semantics
// on a backend are package leaseholdtest's. Every subtest uses keys of its
// own, so a suite can run against a shared server.
//
// It also offers Faulty, a wrapper that counts calls and injects faults into
// any backend, used by both suites and by the engine's own tests. This
// package does not import package leasehold.
package backendtest
