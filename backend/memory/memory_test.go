package memory_test

import (
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/leaseholdtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	newBackend := func(t *testing.T) backend.Backend { return memory.New() }
	backendtest.Run(t, newBackend)
	leaseholdtest.Run(t, newBackend)
}

// TestConformanceNamespaces: a memory store's namespace is the store itself.
func TestConformanceNamespaces(t *testing.T) {
	backendtest.RunNamespaces(t, func(t *testing.T, _ string) backend.Backend { return memory.New() })
}
