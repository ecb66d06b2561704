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

// TestConformance runs both suites on the memory store. It has no link to
// black-hole: the Backend row "every call ends with its context" is skipped,
// and the Manager's runs on a store whose every call, once stalled, waits
// for its context (backendtest.Faulty.Stall), which checks the engine's side.
func TestConformance(t *testing.T) {
	newBackend := func(t *testing.T) backend.Backend { return memory.New() }
	backendtest.Run(t, newBackend)
	leaseholdtest.RunWith(t, leaseholdtest.Options{Blackhole: stalled}, newBackend)
}

// stalled is the Manager suite's Options.Blackhole on memory.
func stalled(*testing.T) (backend.Backend, func()) {
	f, b := backendtest.Wrap(memory.New())
	return b, func() { f.Stall.Store(true) }
}

// TestConformanceNamespaces: a memory store's namespace is the store itself.
func TestConformanceNamespaces(t *testing.T) {
	backendtest.RunNamespaces(t, func(t *testing.T, _ string) backend.Backend { return memory.New() })
}
