package leasehold_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
)

// amnesiac is a store that forgot its fencing counter: every grant reports
// token 7 (the requests naming token 7 are mapped back to the real holding).
type amnesiac struct {
	backend.Backend
	mu   sync.Mutex
	real map[string]uint64
}

func (a *amnesiac) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	g, err := a.Backend.Acquire(ctx, r)
	if g.Acquired {
		a.mu.Lock()
		a.real[r.Key] = g.Token
		a.mu.Unlock()
		g.Token = 7
	}
	return g, err
}

// Info declares nothing optional, RenewBatch renews through Renew: every call
// reaches the overrides.
func (a *amnesiac) Info() backend.Info { return plainInfo(a.Backend) }

func (a *amnesiac) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	return backend.RenewEach(ctx, a, rs)
}

func (a *amnesiac) Release(ctx context.Context, r backend.ReleaseRequest) error {
	a.mu.Lock()
	if r.Token == 7 {
		r.Token = a.real[r.Key]
	}
	a.mu.Unlock()
	return a.Backend.Release(ctx, r)
}

// TestRepeatedTokenIsRefused: a grant whose token is not above one the
// Manager has seen for the name is released and reported, never handed out:
// a holder whose token does not fence off its predecessor must not work.
func TestRepeatedTokenIsRefused(t *testing.T) {
	store := memory.New()
	m, err := leasehold.New(&amnesiac{Backend: store, real: map[string]uint64{}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l2, err := m.Acquire(ctx, "job"); !errors.Is(err, leasehold.ErrTokenNotIncreasing) {
		t.Fatalf("second grant with the same token: %v, %v; want ErrTokenNotIncreasing", l2, err)
	}
	if n := store.Len(); n != 0 {
		t.Errorf("the refused grant was left in the store (%d leases)", n)
	}
}
