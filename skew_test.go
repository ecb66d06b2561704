package leasehold_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
)

// skewed is a store whose clock runs behind this host's: every timestamp it
// reports is `by` earlier than the local clock would say. Durations are its
// own measurements and need no shift.
type skewed struct {
	backend.Backend
	by       time.Duration
	acquires atomic.Int64
}

// Info declares nothing optional: calls go through the backend actor, and
// waiters poll.
func (s *skewed) Info() backend.Info { return plainInfo(s.Backend) }

// RenewBatch renews through Renew, so that batches are shifted too.
func (s *skewed) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	return backend.RenewEach(ctx, s, rs)
}

func (s *skewed) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	s.acquires.Add(1)
	g, err := s.Backend.Acquire(ctx, r)
	return s.shift(g), err
}

func (s *skewed) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	g, err := s.Backend.Renew(ctx, r)
	return s.shift(g), err
}

func (s *skewed) shift(g backend.Grant) backend.Grant {
	if !g.ExpiresAt.IsZero() {
		g.ExpiresAt = g.ExpiresAt.Add(-s.by)
	}
	if !g.HolderExpiresAt.IsZero() {
		g.HolderExpiresAt = g.HolderExpiresAt.Add(-s.by)
	}
	return g
}

// TestStoreClockBehindDoesNotMakeWaitersSpin: with the store's clock 30 s
// behind, a waiter for a held name polls at its ordinary backoff. (Comparing
// the holder's expiry on the store's clock with the local clock made it poll
// every millisecond: some 400 attempts in this test's 400 ms.)
func TestStoreClockBehindDoesNotMakeWaitersSpin(t *testing.T) {
	store := &skewed{Backend: memory.New(), by: 30 * time.Second}
	holder, err := leasehold.New(store, leasehold.WithOwner("holder"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	waiter, err := leasehold.New(store, leasehold.WithOwner("waiter"))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close(context.Background())
	if _, err := holder.Acquire(context.Background(), "job", leasehold.WithTTL(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	before := store.acquires.Load()
	_, err = waiter.Acquire(context.Background(), "job", leasehold.WithWait(400*time.Millisecond))
	if !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatalf("Acquire = %v, want ErrNotAcquired", err)
	}
	// Backoff from 2 ms doubling to 250 ms fits about 8 attempts in 400 ms
	// (fewer on a slow machine, never more).
	if n := store.acquires.Load() - before; n > 20 {
		t.Errorf("%d attempts in 400 ms against a held name, want an ordinary backoff (≤ 20)", n)
	}
}
