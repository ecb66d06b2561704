package leaseholdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
)

// Run runs the Manager suite against backends made by newBackend (called
// once per subtest; the suite does not close them: register that in
// newBackend with t.Cleanup).
func Run(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	RunWith(t, Options{}, newBackend)
}

// Options adapt the suite to a backend's limits (see backendtest.Options).
type Options = backendtest.Options

// RunWith is Run with Options.
func RunWith(t *testing.T, o Options, newBackend func(t *testing.T) backend.Backend) {
	s := &suite{newBackend: newBackend, short: o.TTL(shortTTL), tiny: o.TTL(tinyTTL), patience: o.Stretch(patience), often: o.Stretch(often),
		blackhole: o.Blackhole}
	// The group names are those the rows had in backendtest (the docs cite
	// Identity/… rows); none is one of backendtest's (Backend, Inspect, Queue, Limit), so
	// both suites can run under one test.
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Manager", s.managerCases()},   // Manager semantics on this backend
		{"Observe", s.observeCases()},   // health check and metrics
		{"Identity", s.identityCases()}, // holdings, tokens, Close
		{"HandOff", s.queueCases()},     // the store's waiter queue, from the Managers' side
		{"WithLimit", s.limitCases()},   // names with several holders
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, c.run)
			}
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T)
}

type suite struct {
	newBackend func(t *testing.T) backend.Backend
	// short and tiny are shortTTL and tinyTTL, stretched by the store's
	// time scale and rounded up to its TTL unit; patience is stretched too.
	short, tiny, patience time.Duration
	// often is the renew period of the rows that renew many leases
	// quickly, stretched like the TTLs: a slow store still keeps up.
	often     time.Duration
	blackhole func(t *testing.T) (backend.Backend, func()) // Options.Blackhole
}

// Generous bounds: the suite runs under -race on small, shared machines.
const (
	shortTTL = 500 * time.Millisecond
	// tinyTTL is for holdings the test lets expire at once.
	tinyTTL  = 50 * time.Millisecond
	patience = 5 * time.Second
	often    = 100 * time.Millisecond
)

// uniq returns a key prefix no other test (or earlier run) uses.
func uniq(t *testing.T) string { return backendtest.Prefix(t) }

func ctxT(t *testing.T) context.Context { return backendtest.Context(t) }

// newManager starts a Manager on b with its own owner and this test's key
// prefix, closed when the test ends.
func (s *suite) newManager(t *testing.T, b backend.Backend, owner, prefix string, opts ...leasehold.Option) *leasehold.Manager {
	t.Helper()
	opts = append([]leasehold.Option{leasehold.WithOwner(owner), leasehold.WithKeyPrefix(prefix)}, opts...)
	m, err := leasehold.New(b, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.patience)
		defer cancel()
		// context.Canceled: the test closed it first with an ended context.
		if err := m.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// eventually polls cond until it holds or patience runs out. It is for state
// that has no signal to await (a row in a foreign store).
func (s *suite) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(s.patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitClosed waits for ch to close.
func waitClosed(t *testing.T, what string, ch <-chan struct{}, within time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("%s did not happen within %v", what, within)
	}
}
