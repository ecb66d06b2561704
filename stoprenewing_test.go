package leasehold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// A lease whose renewals are stopped ends at its local deadline, as lost,
// while one acquired beside it with the same TTL goes on renewing.
func TestStopRenewingLetsTheLeaseExpire(t *testing.T) {
	m, _ := newManager(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	stopped, err := m.Acquire(ctx, "stopped", leasehold.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := m.Acquire(ctx, "kept", leasehold.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.StopRenewing(ctx); err != nil {
		t.Fatalf("StopRenewing: %v", err)
	}
	select {
	case <-stopped.Lost():
	case <-time.After(10 * ttl):
		t.Fatalf("not lost within %v of StopRenewing", 10*ttl)
	}
	if !errors.Is(stopped.Err(), leasehold.ErrLost) {
		t.Errorf("Err = %v, want ErrLost", stopped.Err())
	}
	// The other lease's first renewal fell due long before this one's
	// deadline: it is still held, so renewing goes on for leases not stopped.
	if err := kept.Err(); err != nil {
		t.Errorf("the lease beside it ended: %v", err)
	}
	if err := stopped.StopRenewing(ctx); !errors.Is(err, leasehold.ErrLost) {
		t.Errorf("StopRenewing after the loss = %v, want ErrLost", err)
	}
	// Renew still works on a lease whose automatic renewals are off.
	if err := kept.StopRenewing(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kept.Renew(ctx, 0); err != nil {
		t.Errorf("Renew after StopRenewing: %v", err)
	}
	if err := kept.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}
