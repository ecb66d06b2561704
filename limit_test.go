package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
)

// limited is a memory store that declares a smaller MaxLimit, or no waiter
// queue, than it has.
type limited struct {
	backend.Backend
	maxLimit int
	noQueue  bool
}

func (l *limited) Info() backend.Info {
	info := l.Backend.Info()
	info.MaxLimit = l.maxLimit
	if l.noQueue {
		info.Queue, info.HandOffNotices = false, false
	}
	return info
}

// TestWithLimitAboveTheBackendsMaxLimitIsRefusedBeforeAnyCall: a limit above
// the store's Info.MaxLimit is ErrInvalidOption and errors.ErrUnsupported,
// naming the store and its limit, with no backend call; a limit within it
// is granted.
func TestWithLimitAboveTheBackendsMaxLimitIsRefusedBeforeAnyCall(t *testing.T) {
	for _, most := range []int{0, 1, 4} {
		f, b := backendtest.Wrap(&limited{Backend: memory.New(), maxLimit: most})
		m, err := leasehold.New(b)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, err = m.Acquire(ctx, "job", leasehold.WithLimit(max(most, 1)+1))
		if !errors.Is(err, leasehold.ErrInvalidOption) || !errors.Is(err, errors.ErrUnsupported) ||
			!strings.Contains(err.Error(), "memory") || !strings.Contains(err.Error(), fmt.Sprintf("at most %d", max(most, 1))) {
			t.Errorf("MaxLimit %d: WithLimit(%d) = %v, want ErrInvalidOption wrapping ErrUnsupported naming memory and %d", most, max(most, 1)+1, err, max(most, 1))
		}
		if n := f.Calls(); n != 0 {
			t.Errorf("MaxLimit %d: %d backend calls for a refused limit", most, n)
		}
		if most > 1 {
			l, err := m.Acquire(ctx, "job", leasehold.WithLimit(most))
			if err != nil {
				t.Fatalf("WithLimit(%d) within MaxLimit %d: %v", most, most, err)
			}
			_ = l.Release(ctx)
		}
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWithLimitReleaseNoticeWakesTheWaitersOfEveryHolding: on a store that
// announces releases but keeps no queue, a waiter for a full name polls
// seldom (a second or more apart) and is woken by the release notice, which
// must reach its holding's own lease actor.
func TestWithLimitReleaseNoticeWakesTheWaitersOfEveryHolding(t *testing.T) {
	f, b := backendtest.Wrap(&limited{Backend: memory.New(), maxLimit: backend.MaxLimit, noQueue: true})
	ctx := context.Background()
	m1, err := leasehold.New(b, leasehold.WithOwner("o1"))
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close(ctx)
	m2, err := leasehold.New(b, leasehold.WithOwner("o2"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	lim := leasehold.WithLimit(2)
	l1, err := m1.Acquire(ctx, "job", lim, leasehold.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Acquire(ctx, "job", lim, leasehold.WithTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	before := f.AcquiresBy("o2")
	got := make(chan error, 1)
	go func() {
		l, err := m2.Acquire(ctx, "job", lim, leasehold.WithWait(time.Minute))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	// Refused once: it polls now.
	poll.Until(t, "the waiter's first refusal", 30*time.Second, func() bool { return f.AcquiresBy("o2") > before })
	released := time.Now()
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		// Its poll would come a second or more after its refusal.
		if took := time.Since(released); took >= time.Second {
			t.Errorf("the waiter got the slot %v after the release: by its poll, not the notice", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter never got the slot")
	}
}

// TestWithLimitHoldersAndHeld: Holders lists every holding of a name by
// token, whoever holds it; Held lists this Manager's.
func TestWithLimitHoldersAndHeld(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	m1, _ := leasehold.New(store, leasehold.WithOwner("o1"))
	defer m1.Close(ctx)
	m2, _ := leasehold.New(store, leasehold.WithOwner("o2"))
	defer m2.Close(ctx)
	var ls []*leasehold.Lease
	for _, m := range []*leasehold.Manager{m1, m2, m1} {
		l, err := m.Acquire(ctx, "pool", leasehold.WithLimit(3), leasehold.WithMetadata(m.Owner()))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	hs, err := m2.Holders(ctx, "pool")
	if err != nil || len(hs) != 3 {
		t.Fatalf("Holders = %+v, %v", hs, err)
	}
	for i, h := range hs {
		if h.Token != ls[i].Token() || h.Owner != ls[i].Owner() || h.Metadata != ls[i].Owner() || h.Limit != 3 || h.Name != "pool" {
			t.Errorf("Holders[%d] = %+v, want lease %d", i, h, ls[i].Token())
		}
	}
	if held := m1.Held(); len(held) != 2 || held[0].Token != ls[0].Token() || held[1].Token != ls[2].Token() {
		t.Errorf("m1.Held = %+v, want its two holdings by token", held)
	}
	if info, ok, err := m2.Inspect(ctx, "pool"); err != nil || !ok || info.Limit != 3 {
		t.Errorf("Inspect = %+v, %v, %v, want a holding with limit 3", info, ok, err)
	}
	if _, err := m2.Holders(ctx, ""); !errors.Is(err, leasehold.ErrInvalidName) {
		t.Errorf("Holders(\"\") = %v, want ErrInvalidName", err)
	}
}
