package leasehold_test

import (
	"context"
	"testing"

	"github.com/leasehold/leasehold"
)

// TestLeaseFrom: the lease comes back from its Context and from contexts
// derived from it, and from no other.
func TestLeaseFrom(t *testing.T) {
	m, _ := newManager(t)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	derived, cancel := context.WithCancel(l.Context())
	defer cancel()
	for _, c := range []context.Context{l.Context(), derived} {
		if got, ok := leasehold.LeaseFrom(c); !ok || got != l {
			t.Errorf("LeaseFrom = %v, %v; want the lease", got, ok)
		}
	}
	if _, ok := leasehold.LeaseFrom(ctx); ok {
		t.Error("LeaseFrom(Background) found a lease")
	}
	var inDo *leasehold.Lease
	if err := m.Do(ctx, "b", func(ctx context.Context) error {
		inDo, _ = leasehold.LeaseFrom(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inDo == nil || inDo.Name() != "b" || inDo.Token() == 0 {
		t.Errorf("LeaseFrom inside Do = %v, want lease b", inDo)
	}
}
