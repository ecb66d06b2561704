package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// TestHeldLeasesSleepAndWake: leases held with nothing to do lose their
// actors (they sleep) and stay held: the store keeps being renewed; a lease
// the store takes away is lost and told; a sleeping lease's Release, Renew
// and StopRenewing work as a running one's; Close releases every one.
func TestHeldLeasesSleepAndWake(t *testing.T) {
	b, sys, m := watchedManager(t)
	ctx := context.Background()
	var err error
	before := map[string]bool{}
	for _, id := range actorIDs(sys) {
		before[id] = true
	}
	const n = 40
	ls := make([]*leasehold.Lease, n)
	for i := range ls {
		// A TTL far longer than the renewal period: a renewal made late by
		// a loaded machine is still in time, and loses nothing.
		if ls[i], err = m.Acquire(ctx, fmt.Sprint("sleeper-", i), leasehold.WithTTL(10*time.Second),
			leasehold.WithRenewEvery(200*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	// Every actor the leases added stops: they all sleep.
	asleep := watchAll(sys, slices.DeleteFunc(actorIDs(sys), func(id string) bool {
		return before[id] || strings.HasPrefix(id, "guardian")
	}))
	select {
	case <-asleep:
	case <-time.After(20 * time.Second):
		t.Fatal("the held leases' actors still run: they never slept")
	}
	// Asleep, they are renewed, and stay asleep: each store record's
	// expiry moves on, and no actor starts.
	actors := liveActors(sys)
	was := make([]time.Time, n)
	for i, l := range ls {
		h, ok, err := b.Inspect(ctx, l.Name())
		if err != nil || !ok {
			t.Fatalf("%s not on the store: %v", l.Name(), err)
		}
		was[i] = h.ExpiresAt
	}
	for i, l := range ls {
		waitFor(t, fmt.Sprintf("%s renewed while asleep", l.Name()), func() bool {
			h, ok, err := b.Inspect(ctx, l.Name())
			return err == nil && ok && h.Token == l.Token() && h.ExpiresAt.After(was[i])
		})
		if err := l.Err(); err != nil {
			t.Fatalf("%s: %v while asleep", l.Name(), err)
		}
	}
	if now := liveActors(sys); now != actors {
		t.Fatalf("%d actors after the renewals, %d before: renewals woke leases", now, actors)
	}
	// The store takes one away: its sleeping lease wakes at the refused
	// renewal and is lost.
	if _, ok, err := b.Revoke(ctx, ls[0].Name(), ls[0].Token()); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	select {
	case <-ls[0].Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("a revoked sleeping lease was never lost")
	}
	if !errors.Is(ls[0].Err(), leasehold.ErrLost) {
		t.Fatalf("revoked: %v, want ErrLost", ls[0].Err())
	}
	// Commands wake the others.
	if err := ls[1].Renew(ctx, 2*time.Second); err != nil {
		t.Fatalf("Renew of a sleeping lease: %v", err)
	}
	if err := ls[2].StopRenewing(ctx); err != nil {
		t.Fatalf("StopRenewing of a sleeping lease: %v", err)
	}
	if err := ls[3].Release(ctx); err != nil {
		t.Fatalf("Release of a sleeping lease: %v", err)
	}
	if _, ok, _ := b.Inspect(ctx, ls[3].Name()); ok {
		t.Fatal("a released sleeping lease is still on the store")
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 0 {
		t.Fatalf("the store holds %d leases after Close", b.Len())
	}
	for _, l := range ls[3:] {
		if !errors.Is(l.Err(), leasehold.ErrReleased) {
			t.Fatalf("%s after Close: %v, want ErrReleased", l.Name(), l.Err())
		}
	}
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
