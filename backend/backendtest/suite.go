package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Run runs the conformance suite against backends made by newBackend (called
// once per subtest; the suite does not close them: register that in
// newBackend with t.Cleanup).
func Run(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	RunWith(t, Options{}, newBackend)
}

// Options adapt the suite to a backend's limits.
type Options struct {
	// TTLUnit, when not 0, is the granularity (and the minimum) of the TTLs
	// the backend accepts, e.g. time.Second for etcd, whose leases count
	// whole seconds. The suite's short TTLs (50ms, 500ms and multiples) are
	// then rounded up to whole units, and its waits for expiry scale with
	// them.
	TTLUnit time.Duration
}

// Round rounds d up to whole TTLUnits (d itself when TTLUnit is 0).
func (o Options) Round(d time.Duration) time.Duration {
	if u := o.TTLUnit; u > 0 {
		return (d + u - 1) / u * u
	}
	return d
}

// RunWith is Run with Options.
func RunWith(t *testing.T, o Options, newBackend func(t *testing.T) backend.Backend) {
	s := &suite{newBackend: newBackend, short: o.Round(shortTTL), tiny: o.Round(tinyTTL)}
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Backend", s.backendCases()}, // the Backend contract itself
		{"Inspect", s.inspectCases()}, // Inspector, Lister, Revoker
		{"Queue", s.queueCases()},     // the waiter queue and the hand-off
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
	// short and tiny are shortTTL and tinyTTL, rounded up to the backend's
	// TTL unit.
	short, tiny time.Duration
}

// Generous bounds: the suite runs under -race on small, shared machines.
const (
	shortTTL = 500 * time.Millisecond
	// tinyTTL is for holdings the test lets expire at once.
	tinyTTL  = 50 * time.Millisecond
	patience = 5 * time.Second
)

// uniq returns a key prefix no other test (or earlier run) uses.
func uniq(t *testing.T) string { return Prefix(t) }

// Prefix returns a key prefix no other test (or earlier run) uses, for the
// conformance suites (this one and package leaseholdtest).
func Prefix(t *testing.T) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	name := t.Name()
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return "lhtest/" + strings.ReplaceAll(name, "/", ".") + "/" + hex.EncodeToString(r[:]) + "/"
}

func ctxT(t *testing.T) context.Context { return Context(t) }

// Context is a test's context for one store call: it ends with the test, or
// after 30 s.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or patience runs out. It is for state
// that has no signal to await (a row in a foreign store).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
