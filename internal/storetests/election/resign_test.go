package election_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/internal/storetests/localstore"
)

// patience bounds every wait for something that must happen.
const patience = 10 * time.Second

func newManagers(t *testing.T, b backend.Backend, owners ...string) []*leasehold.Manager {
	t.Helper()
	ms := make([]*leasehold.Manager, len(owners))
	for i, o := range owners {
		m, err := leasehold.New(b, leasehold.WithOwner(o))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close(context.Background()) })
		ms[i] = m
	}
	return ms
}

// campaign runs election.Run in a goroutine; the returned channel is closed
// when Run has returned, and cancel resigns.
func campaign(t *testing.T, m *leasehold.Manager, name string, cb election.Callbacks, opts ...leasehold.AcquireOption) (done <-chan struct{}, cancel context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		if err := election.Run(ctx, m, name, cb, opts...); err != nil {
			t.Errorf("Run(%s): %v", m.Owner(), err)
		}
	}()
	t.Cleanup(func() { cancel(); <-ch })
	return ch, cancel
}

// await waits for a value on ch, for at most patience.
func await[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	return poll.Receive(t, what, patience, ch)
}

// gate is a channel the test opens once; open may be called again.
func gate() (ch <-chan struct{}, open func()) {
	c := make(chan struct{})
	return c, sync.OnceFunc(func() { close(c) })
}

// testResignWaitsForTheCallback: a leader whose callback goes on working
// after resigning keeps the lease, renewed, until the callback returns; only
// then is it released, and the next leader starts.
func testResignWaitsForTheCallback(t *testing.T, b backend.Backend, name string) {
	ms := newManagers(t, b, "node-a", "node-b")
	const ttl = 600 * time.Millisecond // the callback outlives it twice over
	var aRunning atomic.Bool
	aLease := make(chan *leasehold.Lease, 1)
	finish, open := gate()
	aDone, resignA := campaign(t, ms[0], name, election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			aRunning.Store(true)
			l, _ := leasehold.LeaseFrom(ctx)
			aLease <- l
			<-ctx.Done()
			<-finish // clean-up that takes its time
			aRunning.Store(false)
		},
	}, leasehold.WithTTL(ttl))
	t.Cleanup(open) // runs before the Run's clean-up waits for it: a failing test must not hang
	lease := await(t, "node-a's election", aLease)

	bStarted := make(chan bool, 1) // whether node-a's callback still ran
	campaign(t, ms[1], name, election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			bStarted <- aRunning.Load()
			<-ctx.Done()
		},
	}, leasehold.WithTTL(ttl))

	resignA()
	select {
	case <-bStarted:
		t.Fatal("node-b started leading while node-a's callback still ran")
	case <-time.After(3 * ttl): // without renewals node-a's lease would have expired
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("node-a's lease ended while its callback ran: %v", err)
	}
	open()
	if overlap := await(t, "node-b's election", bStarted); overlap {
		t.Error("node-b started leading while node-a's callback still ran")
	}
	await(t, "node-a's Run returning", aDone)
	if err := lease.Err(); !errors.Is(err, leasehold.ErrReleased) {
		t.Errorf("node-a's lease ended with %v, want ErrReleased (released once the callback returned)", err)
	}
}

func TestResignWaitsForTheCallbackOnMemory(t *testing.T) {
	testResignWaitsForTheCallback(t, memory.New(), "leader")
}

func TestResignWaitsForTheCallbackOnRedis(t *testing.T) {
	testResignWaitsForTheCallback(t, localstore.Redis(t), fmt.Sprintf("resign-test-%d", time.Now().UnixNano()))
}

func TestResignWaitsForTheCallbackOnPostgres(t *testing.T) {
	testResignWaitsForTheCallback(t, localstore.Postgres(t, "election_test"), fmt.Sprintf("resign-test-%d", time.Now().UnixNano()))
}

// A callback that outlives the grace is not cut short by a release: its
// lease stops renewing and ends at its TTL, and only then can the next leader
// start. Run returns only once the callback has.
func TestResignGraceLetsTheLeaseExpire(t *testing.T) {
	ms := newManagers(t, memory.New(), "node-a", "node-b")
	const ttl = 500 * time.Millisecond
	aLease := make(chan *leasehold.Lease, 1)
	finish, open := gate()
	aDone, resignA := campaign(t, ms[0], "leader", election.Callbacks{
		ResignGrace: 100 * time.Millisecond,
		OnStartedLeading: func(ctx context.Context) {
			l, _ := leasehold.LeaseFrom(ctx)
			aLease <- l
			<-ctx.Done()
			<-finish // stuck past the grace
		},
	}, leasehold.WithTTL(ttl))
	t.Cleanup(open) // runs before the Run's clean-up waits for it: a failing test must not hang
	lease := await(t, "node-a's election", aLease)
	bStarted := make(chan error, 1) // node-a's lease's error then
	campaign(t, ms[1], "leader", election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			bStarted <- lease.Err()
			<-ctx.Done()
		},
	}, leasehold.WithTTL(ttl))

	resignA()
	if err := await(t, "node-b's election", bStarted); !errors.Is(err, leasehold.ErrLost) {
		t.Errorf("node-b started leading while node-a's lease had error %v; want it lost (expired) first", err)
	}
	select {
	case <-aDone:
		t.Fatal("node-a's Run returned while its callback still ran")
	default:
	}
	open()
	await(t, "node-a's Run returning", aDone)
}

// Observe follows the leaders without campaigning: nobody, then each leader.
func TestObserve(t *testing.T) {
	ms := newManagers(t, memory.New(), "node-a", "node-b", "dashboard")
	seen := make(chan string, 16)
	ctx, cancel := context.WithCancel(context.Background())
	observed := make(chan error, 1)
	go func() { observed <- election.Observe(ctx, ms[2], "leader", func(id string) { seen <- id }) }()
	if id := await(t, "the first observation", seen); id != "" {
		t.Fatalf("first observation %q, want \"\" (nobody leads)", id)
	}
	elected := make(chan string, 2)
	leadUntilDone := func(id string) election.Callbacks {
		return election.Callbacks{OnStartedLeading: func(ctx context.Context) { elected <- id; <-ctx.Done() }}
	}
	_, resignA := campaign(t, ms[0], "leader", leadUntilDone("node-a"))
	await(t, "node-a's election", elected)
	if id := await(t, "node-a observed", seen); id != "node-a" {
		t.Fatalf("observed %q, want node-a", id)
	}
	campaign(t, ms[1], "leader", leadUntilDone("node-b"))
	resignA()
	await(t, "node-b's election", elected)
	for {
		id := await(t, "node-b observed", seen)
		if id == "node-b" {
			break
		}
		if id != "" {
			t.Fatalf("observed %q, want \"\" or node-b", id)
		}
	}
	if h := ms[2].Held(); len(h) != 0 {
		t.Errorf("the observer holds %v", h)
	}
	cancel()
	if err := await(t, "Observe returning", observed); err != nil {
		t.Errorf("Observe = %v, want nil when ctx ends", err)
	}
	if err := election.Observe(context.Background(), ms[2], "", nil); !errors.Is(err, leasehold.ErrInvalidName) {
		t.Errorf("Observe(\"\") = %v, want ErrInvalidName", err)
	}
}
