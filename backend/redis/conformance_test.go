package redis

import (
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs the suite every backend passes, against the Redis at
// LEASEHOLD_REDIS_ADDR, and through a fault proxy to it for the rows that
// black-hole the link.
func TestConformance(t *testing.T) {
	redistest.Client(t) // skip or fail once, clearly, when Redis is missing
	newBackend := func(t *testing.T) backend.Backend {
		return newTestBackend(t, redistest.Client(t))
	}
	o := backendtest.Options{Blackhole: blackholed}
	backendtest.RunWith(t, o, newBackend)
	leaseholdtest.RunWith(t, o, newBackend)
}

// blackholed is the conformance suites' Options.Blackhole: a backend behind
// a fault proxy to the Redis at LEASEHOLD_REDIS_ADDR, through a client with
// the tests' 5 s ReadTimeout.
func blackholed(t *testing.T) (backend.Backend, func()) {
	p := redistest.NewProxy(t, redistest.Addr())
	b := newTestBackend(t, redistest.NewClient(t, p.Addr()))
	t.Cleanup(func() { p.Blackhole(false) }) // before the backend's own clean-up
	return b, func() { p.Blackhole(true) }
}

// TestConformanceNamespaces: backends with nested key prefixes on one Redis
// share nothing.
func TestConformanceNamespaces(t *testing.T) {
	c := redistest.Client(t)
	backendtest.RunNamespaces(t, func(t *testing.T, prefix string) backend.Backend {
		return newTestBackend(t, c, WithKeyPrefix(prefix))
	})
}
