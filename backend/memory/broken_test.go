package memory_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
)

// brokenStores are memory stores with one deliberate defect each, and the
// conformance row that must catch it.
var brokenStores = map[string]struct {
	row  string // group/row of backendtest.Run
	make func() backend.Backend
}{
	"revives":              {"Backend/RenewOfAnExpiredHoldingIsNotHeld", func() backend.Backend { return &reviving{memory.New(), 1} }},
	"revives-slots":        {"Limit/RenewOfAnExpiredSlotIsNotHeld", func() backend.Backend { return &reviving{memory.New(), 2} }},
	"folds-names":          {"Backend/NamesDifferingByTrailingSpacesOrCaseAreSeparate", func() backend.Backend { return &folding{memory.New()} }},
	"folds-names-in-slots": {"Limit/NamesDifferingByTrailingSpacesOrCaseAreSeparate", func() backend.Backend { return &folding{memory.New()} }},
}

// The rows fail on a store with the defect they are for. Each broken store
// runs in a child process (this test binary), whose failure is the pass.
func TestConformanceCatchesBrokenStores(t *testing.T) {
	if name := os.Getenv("LEASEHOLD_BROKEN_STORE"); name != "" {
		backendtest.Run(t, func(*testing.T) backend.Backend { return brokenStores[name].make() })
		return
	}
	for name, bs := range brokenStores {
		t.Run(name, func(t *testing.T) {
			group, row, _ := strings.Cut(bs.row, "/")
			cmd := exec.Command(os.Args[0], "-test.count=1",
				"-test.run", "^TestConformanceCatchesBrokenStores$/^"+group+"$/^"+row+"$")
			cmd.Env = append(os.Environ(), "LEASEHOLD_BROKEN_STORE="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !strings.Contains(string(out), "--- FAIL: TestConformanceCatchesBrokenStores/"+bs.row) {
				t.Errorf("row %s on a store that %s: %v, want it to fail; output:\n%s", bs.row, name, err, out)
			}
		})
	}
}

// reviving renews an expired holding nobody has taken by granting its
// attempt the key again.
type reviving struct {
	*memory.Backend
	limit int
}

func (r *reviving) Renew(ctx context.Context, req backend.RenewRequest) (backend.Grant, error) {
	g, err := r.Backend.Renew(ctx, req)
	if !errors.Is(err, backend.ErrNotHeld) {
		return g, err
	}
	g, aerr := r.Backend.Acquire(ctx, backend.AcquireRequest{Key: req.Key, Owner: req.Owner, Attempt: req.Attempt, TTL: req.TTL, Limit: r.limit})
	if aerr != nil || !g.Acquired {
		return backend.Grant{}, err
	}
	return g, nil
}

func (r *reviving) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	return backend.RenewEach(ctx, r, rs)
}

// folding treats names that differ by trailing spaces or case as one, as a
// SQL store comparing under a padding, case-insensitive collation would.
type folding struct{ *memory.Backend }

func fold(key string) string { return strings.ToLower(strings.TrimRight(key, " ")) }

func (f *folding) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	r.Key = fold(r.Key)
	return f.Backend.Acquire(ctx, r)
}

func (f *folding) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	r.Key = fold(r.Key)
	return f.Backend.Renew(ctx, r)
}

func (f *folding) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	return backend.RenewEach(ctx, f, rs)
}

func (f *folding) Release(ctx context.Context, r backend.ReleaseRequest) error {
	r.Key = fold(r.Key)
	return f.Backend.Release(ctx, r)
}

func (f *folding) Inspect(ctx context.Context, key string) (backend.Holder, bool, error) {
	return f.Backend.Inspect(ctx, fold(key))
}
