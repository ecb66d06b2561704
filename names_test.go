package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// A rejected name is ErrInvalidName (not the backends' ErrInvalidRequest),
// in the backends' own words, and costs no backend call.
func TestInvalidNameUsesTheBackendsRules(t *testing.T) {
	m, counts := newManager(t)
	for _, name := range []string{" ", "a\x00b", "\xff", strings.Repeat("x", backend.MaxKeyRunes+1)} {
		_, err := m.Acquire(context.Background(), name)
		if !errors.Is(err, leasehold.ErrInvalidName) || errors.Is(err, backend.ErrInvalidRequest) {
			t.Fatalf("Acquire(%q) = %v, want ErrInvalidName only", name, err)
		}
		if p := backend.TextProblem(name, true); !strings.HasSuffix(err.Error(), " "+p) {
			t.Errorf("Acquire(%q) = %v, want it to end with %q", name, err, p)
		}
	}
	if n := counts.Calls(); n != 0 {
		t.Errorf("%d backend calls for invalid names", n)
	}
}
