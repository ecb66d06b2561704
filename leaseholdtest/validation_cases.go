package leaseholdtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// Bad input is rejected before any backend call.

func (s *suite) mInvalidNames(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	for _, name := range []string{"", " ", "\t\n", "a\x00b", "bad\xffutf8", strings.Repeat("n", 201-len([]rune(p.prefix)))} {
		_, err := m.Acquire(ctxT(t), name)
		if !errors.Is(err, leasehold.ErrInvalidName) {
			t.Errorf("Acquire(%.40q) = %v, want ErrInvalidName", name, err)
		}
		if err := m.Do(ctxT(t), name, func(context.Context) error { return nil }); !errors.Is(err, leasehold.ErrInvalidName) {
			t.Errorf("Do(%.40q) = %v, want ErrInvalidName", name, err)
		}
	}
	failing := s.newManager(t, p.b, "o2", "", leasehold.WithKeyNormalizer(func(n string) (string, error) {
		if n == "bad" {
			return "", errors.New("no such tenant")
		}
		return "", nil // an invalid key
	}))
	for _, name := range []string{"bad", "empty-key"} {
		if _, err := failing.Acquire(ctxT(t), name); !errors.Is(err, leasehold.ErrInvalidName) {
			t.Errorf("normalizer case %q: %v, want ErrInvalidName", name, err)
		}
	}
	if n := p.f.Calls(); n != 0 {
		t.Errorf("%d backend calls for invalid names, want 0", n)
	}
}

func (s *suite) mInvalidOptions(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	cases := [][]leasehold.AcquireOption{
		{leasehold.WithTTL(time.Millisecond - 1)},
		{leasehold.WithTTL(0)},
		{leasehold.WithTTL(leasehold.MaxTTL + 1)},
		{leasehold.WithRenewEvery(0)},
		{leasehold.WithRenewEvery(-time.Second)},
		{leasehold.WithTTL(time.Second), leasehold.WithRenewEvery(time.Second)},
		{leasehold.WithRenewEvery(2 * time.Second), leasehold.WithTTL(time.Second)},
		// Above TTL minus twice the margin (a tenth of the TTL, at most a
		// second): the renewal could not be confirmed before the local
		// deadline.
		{leasehold.WithTTL(time.Second), leasehold.WithRenewEvery(950 * time.Millisecond)},
		{leasehold.WithTTL(time.Second), leasehold.WithRenewEvery(800*time.Millisecond + 1)},
		{leasehold.WithTTL(time.Hour), leasehold.WithRenewEvery(time.Hour - 2*time.Second + 1)},
		{leasehold.WithWait(-2)},
		{leasehold.WithWait(-time.Second)},
		{leasehold.WithMetadata(strings.Repeat("m", backend.MaxMetadataBytes+1))},
		{leasehold.WithMetadata("nul\x00")},
	}
	for i, opts := range cases {
		if _, err := m.Acquire(ctxT(t), "job", opts...); !errors.Is(err, leasehold.ErrInvalidOption) {
			t.Errorf("case %d: %v, want ErrInvalidOption", i, err)
		}
	}
	// The error gives the largest period that can work.
	if _, err := m.Acquire(ctxT(t), "job", leasehold.WithTTL(time.Second), leasehold.WithRenewEvery(900*time.Millisecond)); !strings.Contains(fmt.Sprint(err), "at most 800ms") {
		t.Errorf("WithRenewEvery(900ms) with TTL 1s: %v, want an error saying at most 800ms", err)
	}
	if _, err := leasehold.New(p.b, leasehold.WithOwner("")); !errors.Is(err, leasehold.ErrInvalidOption) {
		t.Errorf("WithOwner(\"\"): %v, want ErrInvalidOption", err)
	}
	if n := p.f.Calls(); n != 0 {
		t.Errorf("%d backend calls for invalid options, want 0", n)
	}
	// Edges that are valid.
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Hour), leasehold.WithRenewEvery(time.Hour-2*time.Second), leasehold.WithWait(leasehold.WaitForever))
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
