package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
)

// countingLister is the memory backend with its List calls counted and the
// key prefixes they asked for recorded.
type countingLister struct {
	*memory.Backend
	lists    atomic.Int64
	prefixes chan string
}

func (c *countingLister) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	c.lists.Add(1)
	select {
	case c.prefixes <- prefix:
	default:
	}
	return c.Backend.List(ctx, prefix, fn)
}

func newLister() *countingLister {
	return &countingLister{Backend: memory.New(), prefixes: make(chan string, 16)}
}

func newManagerOn(t *testing.T, b backend.Backend, opts ...leasehold.Option) *leasehold.Manager {
	t.Helper()
	m, err := leasehold.New(b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func names(ls []leasehold.LeaseInfo) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.Name+"@"+l.Owner)
	}
	return strings.Join(s, " ")
}

// TestList: the leases live now under a prefix, whoever holds them, sorted by
// name, without the Manager's key prefix; nothing of another key prefix, and
// nothing released.
func TestList(t *testing.T) {
	ctx := context.Background()
	b := newLister()
	a := newManagerOn(t, b, leasehold.WithOwner("a"), leasehold.WithKeyPrefix("app/"))
	other := newManagerOn(t, b, leasehold.WithOwner("b"), leasehold.WithKeyPrefix("app/"))
	elsewhere := newManagerOn(t, b, leasehold.WithOwner("c"), leasehold.WithKeyPrefix("other/"))
	for _, acq := range []struct {
		m    *leasehold.Manager
		name string
	}{{a, "jobs/2"}, {other, "jobs/1"}, {a, "jobs/3"}, {a, "locks/x"}, {elsewhere, "jobs/9"}} {
		if _, err := acq.m.Acquire(ctx, acq.name, leasehold.WithTTL(time.Minute), leasehold.WithMetadata("m-"+acq.name)); err != nil {
			t.Fatal(err)
		}
	}
	released, err := a.Acquire(ctx, "jobs/4")
	if err != nil {
		t.Fatal(err)
	}
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}

	got, err := a.List(ctx, "jobs/")
	if err != nil {
		t.Fatal(err)
	}
	if want := "jobs/1@b jobs/2@a jobs/3@a"; names(got) != want {
		t.Errorf("List(jobs/) = %s; want %s", names(got), want)
	}
	if p := <-b.prefixes; p != "app/jobs/" {
		t.Errorf("the backend was asked for %q, want app/jobs/", p)
	}
	for _, l := range got {
		if l.Token == 0 || l.Metadata != "m-"+l.Name || !l.ExpiresAt.After(time.Now()) {
			t.Errorf("List: %+v; want its token, metadata and expiry", l)
		}
	}
	all, err := a.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := "jobs/1@b jobs/2@a jobs/3@a locks/x@a"; names(all) != want {
		t.Errorf("List(\"\") = %s; want %s", names(all), want)
	}
	if none, err := a.List(ctx, "nothing/"); err != nil || len(none) != 0 {
		t.Errorf("List(nothing/) = %v, %v; want nothing", none, err)
	}
}

// A key normalizer is applied to the prefix; its keys are what is listed.
func TestListWithKeyNormalizer(t *testing.T) {
	ctx := context.Background()
	b := newLister()
	m := newManagerOn(t, b, leasehold.WithKeyNormalizer(func(name string) (string, error) {
		if strings.Contains(name, "!") {
			return "", errors.New("no bangs")
		}
		return "ns:" + strings.ToLower(name), nil
	}))
	if _, err := m.Acquire(ctx, "Jobs/A"); err != nil {
		t.Fatal(err)
	}
	got, err := m.List(ctx, "JOBS/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "ns:jobs/a" {
		t.Errorf("List(JOBS/) = %+v; want the key ns:jobs/a", got)
	}
	before := b.lists.Load()
	if _, err := m.List(ctx, "a!"); !errors.Is(err, leasehold.ErrInvalidName) {
		t.Errorf("List with a prefix the normalizer refuses = %v; want ErrInvalidName", err)
	}
	if n := b.lists.Load() - before; n != 0 {
		t.Errorf("%d backend calls for a refused prefix", n)
	}
}

// Bad prefixes are refused with ErrInvalidName before any backend call.
func TestListRejectsBadPrefixes(t *testing.T) {
	b := newLister()
	m := newManagerOn(t, b, leasehold.WithKeyPrefix("app/"))
	for _, p := range []string{"a\x00", "\xff", strings.Repeat("é", 197)} {
		if _, err := m.List(context.Background(), p); !errors.Is(err, leasehold.ErrInvalidName) {
			t.Errorf("List(%.20q) = %v; want ErrInvalidName", p, err)
		}
	}
	// 196 runes and the key prefix make 200: a key may still start with it.
	if _, err := m.List(context.Background(), strings.Repeat("é", 196)); err != nil {
		t.Errorf("List(a 200-rune key prefix) = %v", err)
	}
	if n := b.lists.Load(); n != 1 {
		t.Errorf("%d backend calls, want 1 (only the valid prefix)", n)
	}
	if _, err := m.List(context.Background(), " "); err != nil {
		t.Errorf("List(\" \") = %v; a name may start with a blank", err)
	}
}

// noLister is a backend whose store cannot list.
type noLister struct{ backend.Backend }

func (noLister) List(context.Context, string, func(backend.Holder) bool) error {
	return fmt.Errorf("noLister: List: %w", errors.ErrUnsupported)
}

func TestListErrors(t *testing.T) {
	m := newManagerOn(t, noLister{memory.New()})
	if _, err := m.List(context.Background(), "x"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("List on a backend that cannot list = %v; want ErrUnsupported", err)
	}
	b := newLister()
	m = newManagerOn(t, b)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.List(ended, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("List with an ended ctx = %v; want context.Canceled", err)
	}
	_ = m.Close(context.Background())
	if _, err := m.List(context.Background(), "x"); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("List after Close = %v; want ErrClosed", err)
	}
}
