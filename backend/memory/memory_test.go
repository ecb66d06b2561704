package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

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

// TestWithClock: the store's clock decides expiry. A holding lives until
// that clock reaches its expiry, however little real time has passed, and is
// gone at that instant.
func TestWithClock(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	b := memory.New(memory.WithClock(clock))
	ctx := context.Background()
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "a", Attempt: "a.1", TTL: time.Minute})
	if err != nil || !g.Acquired || !g.ExpiresAt.Equal(clock().Add(time.Minute)) {
		t.Fatalf("Acquire = %+v, %v; want a grant expiring a minute after the store's now", g, err)
	}
	advance(time.Minute - time.Millisecond)
	if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "b", Attempt: "b.1", TTL: time.Minute}); err != nil || g.Acquired {
		t.Fatalf("Acquire by b a millisecond before the expiry = %+v, %v; want a refusal", g, err)
	}
	advance(time.Millisecond)
	if n := b.Len(); n != 0 {
		t.Fatalf("Len() = %d at the expiry, want 0", n)
	}
	if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "b", Attempt: "b.2", TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("Acquire by b at the expiry = %+v, %v; want a grant", g, err)
	}
}
