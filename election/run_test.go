package election_test

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/election"
	"go.uber.org/goleak"
)

// The election's tests on the local Redis and PostgreSQL, with the same
// cases on memory beside them, are in internal/storetests/election (a module
// of its own, which may require the store drivers).

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunRejectsBadInput(t *testing.T) {
	m, err := leasehold.New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	if err := election.Run(context.Background(), m, "", election.Callbacks{}); !errors.Is(err, leasehold.ErrInvalidName) {
		t.Errorf("Run(\"\") = %v, want ErrInvalidName", err)
	}
	if err := election.Run(context.Background(), m, "x", election.Callbacks{}, leasehold.WithTTL(-1)); !errors.Is(err, leasehold.ErrInvalidOption) {
		t.Errorf("Run(TTL -1) = %v, want ErrInvalidOption", err)
	}
	_ = m.Close(context.Background())
	if err := election.Run(context.Background(), m, "x", election.Callbacks{}); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("Run on a closed Manager = %v, want ErrClosed", err)
	}
}
