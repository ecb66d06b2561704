package leaseholdtest

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
)

// pair is the fixture of the Manager cases: a backend behind backendtest's counting, fault-injecting wrapper, and a key prefix of the test's own.

// pair is a backend with a counting wrapper and this test's key prefix.
type pair struct {
	f      *backendtest.Faulty
	b      backend.Backend // what Managers get (f)
	raw    backend.Backend
	prefix string
	s      *suite
}

func (s *suite) pair(t *testing.T) pair {
	raw := s.newBackend(t)
	f, b := backendtest.Wrap(raw)
	return pair{f: f, b: b, raw: raw, prefix: uniq(t), s: s}
}

func (p pair) manager(t *testing.T, owner string, opts ...leasehold.Option) *leasehold.Manager {
	return p.s.newManager(t, p.b, owner, p.prefix, opts...)
}

func mustAcquire(t *testing.T, m *leasehold.Manager, name string, opts ...leasehold.AcquireOption) *leasehold.Lease {
	t.Helper()
	l, err := m.Acquire(ctxT(t), name, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q) by %s: %v", name, m.Owner(), err)
	}
	return l
}

func wantNotAcquired(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatalf("err = %v, want ErrNotAcquired", err)
	}
}
