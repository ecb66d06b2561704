package redis

import (
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs the suite every backend passes, against the Redis at
// LEASEHOLD_REDIS_ADDR.
func TestConformance(t *testing.T) {
	redistest.Client(t) // skip or fail once, clearly, when Redis is missing
	newBackend := func(t *testing.T) backend.Backend {
		return newTestBackend(t, redistest.Client(t))
	}
	backendtest.Run(t, newBackend)
	leaseholdtest.Run(t, newBackend)
}

// TestConformanceNamespaces: backends with nested key prefixes on one Redis
// share nothing.
func TestConformanceNamespaces(t *testing.T) {
	c := redistest.Client(t)
	backendtest.RunNamespaces(t, func(t *testing.T, prefix string) backend.Backend {
		return newTestBackend(t, c, WithKeyPrefix(prefix))
	})
}
