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

	// TimeScale, when above 1, stretches the suites' TTLs and their waits
	// by that factor, for stores much slower than loopback Redis (a
	// database server whose acquire takes tens of milliseconds). It
	// loosens no assertion: what must happen still must, what must not
	// still must not; only the time given grows.
	TimeScale float64

	// Blackhole, when set, returns a backend whose link to its store the
	// test can black-hole (through a fault proxy such as
	// internal/faultproxy), and the function that does it: from then on the
	// link swallows every byte both ways and its connections stay open, as
	// in a partition. The rows "every call ends with its context"
	// (Backend/EveryCallEndsWithItsContext here,
	// Manager/EveryCallEndsWithItsContext in package leaseholdtest) need it,
	// and are skipped without it. Register the backend's clean-up, and the
	// link's repair before it, with t.Cleanup.
	Blackhole func(t *testing.T) (b backend.Backend, blackhole func())
}

// Round rounds d up to whole TTLUnits (d itself when TTLUnit is 0).
func (o Options) Round(d time.Duration) time.Duration {
	if u := o.TTLUnit; u > 0 {
		return (d + u - 1) / u * u
	}
	return d
}

// Stretch is d times TimeScale (d itself when TimeScale is at most 1).
func (o Options) Stretch(d time.Duration) time.Duration {
	if o.TimeScale > 1 {
		return time.Duration(float64(d) * o.TimeScale)
	}
	return d
}

// TTL is the suites' TTL d, stretched and rounded up to whole TTLUnits.
func (o Options) TTL(d time.Duration) time.Duration { return o.Round(o.Stretch(d)) }

// RunWith is Run with Options.
func RunWith(t *testing.T, o Options, newBackend func(t *testing.T) backend.Backend) {
	s := &suite{newBackend: newBackend, short: o.TTL(shortTTL), tiny: o.TTL(tinyTTL), patience: o.Stretch(patience), blackhole: o.Blackhole}
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Backend", s.backendCases()}, // the Backend contract itself
		{"Inspect", s.inspectCases()}, // Inspect, List, Revoke
		{"Queue", s.queueCases()},     // the waiter queue and the hand-off
		{"Limit", s.limitCases()},     // keys with several holders
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
	blackhole             func(t *testing.T) (backend.Backend, func()) // Options.Blackhole
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
