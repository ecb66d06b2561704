package partition_test

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
	"github.com/leasehold/leasehold/partition"
)

// newManager is a Manager of owner on b, closed when the test ends.
func newManager(t *testing.T, b backend.Backend, owner string) *leasehold.Manager {
	t.Helper()
	m, err := leasehold.New(b, leasehold.WithOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func itemsN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p-%d", i)
	}
	return out
}

// Bad input is refused with ErrInvalidName or ErrInvalidOption before
// anything is acquired.
func TestJoinRejectsBadInput(t *testing.T) {
	f, w := backendtest.Wrap(memory.New())
	m := newManager(t, w, "node")
	good := []string{"a", "b"}
	cases := []struct {
		name  string
		group string
		items []string
		opts  []partition.Option
		want  error
	}{
		{"empty group", "", good, nil, leasehold.ErrInvalidName},
		{"blank group", "  ", good, nil, leasehold.ErrInvalidName},
		{"NUL in group", "g\x00", good, nil, leasehold.ErrInvalidName},
		{"group too long for the membership lease", strings.Repeat("g", 190), good, nil, leasehold.ErrInvalidName},
		{"no items", "g", nil, nil, leasehold.ErrInvalidOption},
		{"empty item set", "g", []string{}, nil, leasehold.ErrInvalidOption},
		{"duplicate item", "g", []string{"a", "b", "a"}, nil, leasehold.ErrInvalidName},
		{"empty item", "g", []string{"a", ""}, nil, leasehold.ErrInvalidName},
		{"blank item", "g", []string{" "}, nil, leasehold.ErrInvalidName},
		{"NUL in item", "g", []string{"a\x00b"}, nil, leasehold.ErrInvalidName},
		{"item not UTF-8", "g", []string{"\xff"}, nil, leasehold.ErrInvalidName},
		{"item too long for its lease", "g", []string{strings.Repeat("x", 194)}, nil, leasehold.ErrInvalidName},
		{"TTL 0", "g", good, []partition.Option{partition.WithTTL(0)}, leasehold.ErrInvalidOption},
		{"TTL above MaxTTL", "g", good, []partition.Option{partition.WithTTL(leasehold.MaxTTL + 1)}, leasehold.ErrInvalidOption},
		{"rebalance 0", "g", good, []partition.Option{partition.WithRebalanceEvery(0)}, leasehold.ErrInvalidOption},
		{"grace negative", "g", good, []partition.Option{partition.WithGrace(-time.Second)}, leasehold.ErrInvalidOption},
		{"nil meter provider", "g", good, []partition.Option{partition.WithMeterProvider(nil)}, leasehold.ErrInvalidOption},
	}
	for _, c := range cases {
		mem, err := partition.Join(context.Background(), m, c.group, c.items, partition.Callbacks{}, c.opts...)
		if !errors.Is(err, c.want) || mem != nil {
			t.Errorf("%s: Join = %v, %v; want %v", c.name, mem, err, c.want)
		}
	}
	if _, err := partition.Join(context.Background(), nil, "g", good, partition.Callbacks{}); !errors.Is(err, leasehold.ErrInvalidOption) {
		t.Errorf("Join(nil Manager) = %v; want ErrInvalidOption", err)
	}
	if n := f.Acquires.Load(); n != 0 || len(m.Held()) != 0 {
		t.Errorf("the refused Joins made %d acquires and hold %v", n, m.Held())
	}
	// The longest names that fit are accepted: "g/items/" and 192 runes.
	mem, err := partition.Join(context.Background(), m, "g", []string{strings.Repeat("x", 192)}, partition.Callbacks{})
	if err != nil {
		t.Fatalf("Join with a 200-rune item lease: %v", err)
	}
	if got := mem.Owned(); len(got) != 1 {
		t.Errorf("Owned = %v; want the one item", got)
	}
	if err := mem.Leave(context.Background()); err != nil {
		t.Error(err)
	}
}

// A member joining with another item set than the group's live members is
// refused with ErrItemSetMismatch before it acquires anything; the same set
// in another order is the same set.
func TestJoinRejectsAnotherItemSet(t *testing.T) {
	store := memory.New()
	a := newManager(t, store, "node-a")
	first, err := partition.Join(context.Background(), a, "g", itemsN(10), partition.Callbacks{}, partition.WithRebalanceEvery(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Leave(context.Background()) })

	fb, wb := backendtest.Wrap(store)
	b := newManager(t, wb, "node-b")
	_, err = partition.Join(context.Background(), b, "g", itemsN(11), partition.Callbacks{})
	if !errors.Is(err, partition.ErrItemSetMismatch) || !strings.Contains(err.Error(), `"node-a"`) {
		t.Errorf("Join with 11 items into a group of 10 = %v; want ErrItemSetMismatch naming node-a", err)
	}
	if n := fb.Acquires.Load(); n != 0 {
		t.Errorf("the refused member made %d acquires", n)
	}
	reversed := itemsN(10)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	second, err := partition.Join(context.Background(), b, "g", reversed, partition.Callbacks{}, partition.WithRebalanceEvery(10*time.Millisecond))
	if err != nil {
		t.Fatalf("Join with the same items in another order: %v", err)
	}
	t.Cleanup(func() { _ = second.Leave(context.Background()) })
	poll.Until(t, "5 items each", patience, func() bool { return len(first.Owned()) == 5 && len(second.Owned()) == 5 })
}

// A membership lease of another item set that got in anyway (it joined at
// the same moment) is left out of the shares.
func TestMemberWithAnotherItemSetIsLeftOut(t *testing.T) {
	store := memory.New()
	a := newManager(t, store, "node-a")
	mem, err := partition.Join(context.Background(), a, "g", itemsN(4), partition.Callbacks{}, partition.WithRebalanceEvery(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Leave(context.Background()) })
	intruder := newManager(t, store, "intruder")
	if _, err := intruder.Acquire(context.Background(), "g/members/intruder",
		leasehold.WithMetadata(`{"partition":1,"group":"g","items":5,"digest":"0123"}`)); err != nil {
		t.Fatal(err)
	}
	rounds := mem.Rounds()
	poll.Until(t, "three more rounds", patience, func() bool { return mem.Rounds() >= rounds+3 })
	if got := mem.Members(); len(got) != 1 || got[0] != "node-a" {
		t.Errorf("Members = %v; want only node-a", got)
	}
	if got := mem.Owned(); len(got) != 4 {
		t.Errorf("Owned = %v; want all 4 items", got)
	}
}

// Another Manager with the same owner is already a member: Join waits for
// its membership lease up to the TTL (it could be this owner's previous
// process), then fails with ErrNotAcquired.
func TestJoinWithALiveOwnerFails(t *testing.T) {
	store := memory.New()
	first, err := partition.Join(context.Background(), newManager(t, store, "same"), "g", itemsN(2), partition.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Leave(context.Background()) })
	const ttl = 300 * time.Millisecond
	start := time.Now()
	_, err = partition.Join(context.Background(), newManager(t, store, "same"), "g", itemsN(2), partition.Callbacks{}, partition.WithTTL(ttl))
	if !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Errorf("Join with a live owner = %v; want ErrNotAcquired", err)
	}
	if took := time.Since(start); took < ttl {
		t.Errorf("Join gave up after %v, before the TTL (%v)", took, ttl)
	}
}

// A Manager's key prefix that makes an item's key too long is found when the
// member first acquires the item: Join fails with ErrInvalidName and leaves
// nothing held.
func TestJoinWithAKeyPrefixTooLongForAnItem(t *testing.T) {
	m, err := leasehold.New(memory.New(), leasehold.WithOwner("node"), leasehold.WithKeyPrefix(strings.Repeat("k", 150)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	_, err = partition.Join(context.Background(), m, "g", []string{"short", strings.Repeat("x", 50)}, partition.Callbacks{})
	if !errors.Is(err, leasehold.ErrInvalidName) {
		t.Errorf("Join = %v; want ErrInvalidName", err)
	}
	if held := m.Held(); len(held) != 0 {
		t.Errorf("after the failed Join the Manager holds %v", held)
	}
}
