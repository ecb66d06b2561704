// Package fencetest is the conformance suite of leasehold's fencing guards:
// every guard (fence.Memory, the PostgreSQL, SQL Server and Redis guards,
// the HTTP and gRPC middleware) must refuse a write whose token is lower
// than the highest its resource recorded, with leasehold.ErrStaleToken, and
// keep the newest holder's data. Each guard's tests call Run with a Guard
// that writes through it.
package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/fence"
)

// Guard is one guarded resource store under test.
type Guard interface {
	// Write sets resource's value under token, atomically with the fence
	// check: a refused write changes nothing.
	Write(ctx context.Context, resource string, token uint64, value string) error
	// Read returns resource's value, "" if none was written.
	Read(ctx context.Context, resource string) (string, error)
}

// Run runs the suite; newGuard returns a guard whose resources no other
// test sees (its own table, key prefix or server).
func Run(t *testing.T, newGuard func(t *testing.T) Guard) {
	cases := []struct {
		name string
		run  func(t *testing.T, g Guard)
	}{
		{"FirstWritePasses", firstWritePasses},
		{"HigherAndEqualPass", higherAndEqualPass},
		{"LowerIsRefused", lowerIsRefused},
		{"ResourcesAreIndependent", resourcesAreIndependent},
		{"InvalidInputChangesNothing", invalidInputChangesNothing},
		{"StaleHolderAfterTakeover", staleHolderAfterTakeover},
		{"ConcurrentWritersNewestWins", concurrentWritersNewestWins},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newGuard(t)) })
	}
}

// StoreGuard makes a Guard of a fence.Store: the value lives in memory, and
// one lock covers the check and the write, as a single-process resource
// would hold it.
func StoreGuard(s fence.Store) Guard { return &storeGuard{s: s, data: map[string]string{}} }

type storeGuard struct {
	s    fence.Store
	mu   sync.Mutex
	data map[string]string
}

func (g *storeGuard) Write(ctx context.Context, resource string, token uint64, value string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.s.Check(ctx, resource, token); err != nil {
		return err
	}
	g.data[resource] = value
	return nil
}

func (g *storeGuard) Read(ctx context.Context, resource string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.data[resource], nil
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustWrite(t *testing.T, g Guard, resource string, token uint64, value string) {
	t.Helper()
	if err := g.Write(testContext(t), resource, token, value); err != nil {
		t.Fatalf("write %q with token %d: %v", resource, token, err)
	}
}

func wantValue(t *testing.T, g Guard, resource, want string) {
	t.Helper()
	got, err := g.Read(testContext(t), resource)
	if err != nil {
		t.Fatalf("read %q: %v", resource, err)
	}
	if got != want {
		t.Fatalf("%q holds %q, want %q", resource, got, want)
	}
}

// wantStale checks that err is the refusal of token with highest recorded.
func wantStale(t *testing.T, err error, resource string, token, highest uint64) {
	t.Helper()
	if !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("write with token %d after %d: got %v, want ErrStaleToken", token, highest, err)
	}
	var se *leasehold.StaleTokenError
	if !errors.As(err, &se) {
		t.Fatalf("%v is not a *StaleTokenError", err)
	}
	if se.Resource != resource || se.Token != token || se.Highest != highest {
		t.Fatalf("StaleTokenError{%q, %d, %d}, want {%q, %d, %d}", se.Resource, se.Token, se.Highest, resource, token, highest)
	}
}

func firstWritePasses(t *testing.T, g Guard) {
	wantValue(t, g, "r", "")
	mustWrite(t, g, "r", 5, "a")
	wantValue(t, g, "r", "a")
}

func higherAndEqualPass(t *testing.T, g Guard) {
	mustWrite(t, g, "r", 5, "a")
	mustWrite(t, g, "r", 5, "b") // the same holder, writing again
	mustWrite(t, g, "r", 1_800_000_000_000_000, "c")
	wantValue(t, g, "r", "c")
}

func lowerIsRefused(t *testing.T, g Guard) {
	mustWrite(t, g, "r", 7, "seven")
	err := g.Write(testContext(t), "r", 6, "six")
	wantStale(t, err, "r", 6, 7)
	wantValue(t, g, "r", "seven")
	// The refusal recorded nothing: 7 still passes.
	mustWrite(t, g, "r", 7, "seven again")
	wantValue(t, g, "r", "seven again")
}

func resourcesAreIndependent(t *testing.T, g Guard) {
	mustWrite(t, g, "r1", 100, "one")
	mustWrite(t, g, "r2", 3, "two")
	wantValue(t, g, "r1", "one")
	wantValue(t, g, "r2", "two")
}

func invalidInputChangesNothing(t *testing.T, g Guard) {
	mustWrite(t, g, "r", 2, "kept")
	for _, c := range []struct {
		resource string
		token    uint64
	}{{"", 3}, {"r", 0}, {"bad\x00name", 3}} {
		err := g.Write(testContext(t), c.resource, c.token, "bad")
		if !errors.Is(err, fence.ErrInvalidFence) {
			t.Errorf("write %q with token %d: got %v, want ErrInvalidFence", c.resource, c.token, err)
		}
	}
	wantValue(t, g, "r", "kept")
}

// staleHolderAfterTakeover is the case fencing exists for, with real
// leases: A's lease ends without A noticing (it stopped renewing, as a
// paused process does), B is granted the name and writes, then A writes
// with its old token and is refused, and B's data stands.
func staleHolderAfterTakeover(t *testing.T, g Guard) {
	ctx := testContext(t)
	b := memory.New()
	mA, err := leasehold.New(b, leasehold.WithOwner("holder-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer mA.Close(context.Background())
	mB, err := leasehold.New(b, leasehold.WithOwner("holder-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer mB.Close(context.Background())

	a, err := mA.Acquire(ctx, "job", leasehold.WithTTL(200*time.Millisecond), leasehold.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, g, "job", a.Token(), "A's work")
	<-a.Context().Done() // A's lease is over; A, paused, does not know yet

	lb, err := mB.Acquire(ctx, "job", leasehold.WithWait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if lb.Token() <= a.Token() {
		t.Fatalf("B's token %d is not above A's %d", lb.Token(), a.Token())
	}
	mustWrite(t, g, "job", lb.Token(), "B's work")

	err = g.Write(ctx, "job", a.Token(), "A's late work")
	wantStale(t, err, "job", a.Token(), lb.Token())
	wantValue(t, g, "job", "B's work")
}

// concurrentWritersNewestWins races writers of tokens 1..n, each writing
// several times: whatever the interleaving, the value left is the newest
// token's, and every refusal names a higher token than its own.
func concurrentWritersNewestWins(t *testing.T, g Guard) {
	ctx := testContext(t)
	const n, writes = 8, 5
	tokens := rand.Perm(n)
	var wg sync.WaitGroup
	errs := make(chan error, n*writes)
	for _, i := range tokens {
		token := uint64(i + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range writes {
				err := g.Write(ctx, "r", token, fmt.Sprint("token ", token))
				var se *leasehold.StaleTokenError
				switch {
				case err == nil:
				case errors.As(err, &se) && se.Highest > token:
					return // refused once, refused for good
				default:
					errs <- fmt.Errorf("token %d: %w", token, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantValue(t, g, "r", fmt.Sprint("token ", n))
}
