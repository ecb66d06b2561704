package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

// TestAcquireOfANameHeldHereSaysNotReentrant: a second Acquire of a name this
// Manager holds is refused with an error that says the holder is this
// Manager and that leases are not re-entrant, not just its own owner id; a
// refusal because another Manager holds the name does not say so.
func TestAcquireOfANameHeldHereSaysNotReentrant(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	m, err := leasehold.New(b, leasehold.WithOwner("me"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	other, err := leasehold.New(b, leasehold.WithOwner("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)

	if _, err := m.Acquire(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]leasehold.AcquireOption{nil, {leasehold.WithWait(50 * time.Millisecond)}} {
		_, err := m.Acquire(ctx, "job", opts...)
		var na *leasehold.NotAcquiredError
		if !errors.As(err, &na) || !errors.Is(err, leasehold.ErrNotAcquired) {
			t.Fatalf("second Acquire (%d options): %v, want a *NotAcquiredError", len(opts), err)
		}
		if !na.HeldHere || !strings.Contains(err.Error(), "held by this Manager") || !strings.Contains(err.Error(), "not re-entrant") {
			t.Errorf("second Acquire (%d options): HeldHere %v, %q; want it to say this Manager holds it and leases are not re-entrant", len(opts), na.HeldHere, err)
		}
	}

	_, err = other.Acquire(ctx, "job")
	var na *leasehold.NotAcquiredError
	if !errors.As(err, &na) || na.HeldHere || strings.Contains(err.Error(), "this Manager") {
		t.Errorf("Acquire by another Manager: %v (HeldHere %v), want a refusal naming the other holder", err, na != nil && na.HeldHere)
	}
}
