package partition_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/partition"
)

// A callback still running after the grace is not cut short by a release:
// its lease stops renewing and ends at its local deadline, and only then
// may another member take the item. OnRevoked and Leave wait for the
// callback all the same.
func TestGraceLetsTheLeaseExpire(t *testing.T) {
	store := memory.New()
	const ttl = 500 * time.Millisecond
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // before the members' clean-up waits for their callbacks: a failing test must not hang
	var mu sync.Mutex
	aLeases := map[string]*leasehold.Lease{}
	aRevoked := make(chan string, 2)
	opts := []partition.Option{partition.WithTTL(ttl), partition.WithRebalanceEvery(20 * time.Millisecond), partition.WithGrace(50 * time.Millisecond)}
	a, err := partition.Join(context.Background(), newManager(t, store, "node-a"), "g", []string{"x", "y"}, partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) {
			l, _ := leasehold.LeaseFrom(ctx)
			mu.Lock()
			aLeases[item] = l
			mu.Unlock()
			<-ctx.Done()
			<-gate // stuck past the grace
		},
		OnRevoked: func(item string) { aRevoked <- item },
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "node-a's callbacks started", patience, func() bool { mu.Lock(); defer mu.Unlock(); return len(aLeases) == 2 })

	type start struct {
		item   string
		before error // node-a's lease of the item, as node-b started
	}
	bStarted := make(chan start, 2)
	b, err := partition.Join(context.Background(), newManager(t, store, "node-b"), "g", []string{"x", "y"}, partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) {
			mu.Lock()
			bStarted <- start{item, aLeases[item].Err()}
			mu.Unlock()
			<-ctx.Done()
		},
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Leave(context.Background()) })
	got := await(t, "node-b taking an item", bStarted)
	if !errors.Is(got.before, leasehold.ErrLost) {
		t.Errorf("node-b started %s while node-a's lease had error %v; want it lost (expired) first", got.item, got.before)
	}
	select {
	case item := <-aRevoked:
		t.Fatalf("OnRevoked(%s) while its callback still runs", item)
	default:
	}
	left := make(chan error, 1)
	go func() { left <- a.Leave(context.Background()) }()
	select {
	case err := <-left:
		t.Fatalf("Leave returned (%v) while callbacks still run", err)
	case <-time.After(2 * ttl): // past both leases' deadlines
	}
	open()
	if err := await(t, "Leave returning", left); err != nil {
		t.Errorf("Leave = %v", err)
	}
	for range 2 {
		await(t, "OnRevoked", aRevoked)
	}
}

// A lost item lease (here revoked by force: its next renewal is rejected)
// ends its callback and is revoked; the member takes the item back when the
// store has freed it, as it is still its share. A lost membership lease is
// taken again, and the member keeps its items meanwhile.
func TestLossOfALeaseIsRepaired(t *testing.T) {
	store := memory.New()
	m := newManager(t, store, "node")
	assigned := make(chan *leasehold.Lease, 8)
	revoked := make(chan string, 8)
	mem, err := partition.Join(context.Background(), m, "g", []string{"a", "b", "c"}, partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) {
			l, _ := leasehold.LeaseFrom(ctx)
			assigned <- l
			<-ctx.Done()
		},
		OnRevoked: func(item string) { revoked <- item },
	}, partition.WithTTL(600*time.Millisecond), partition.WithRebalanceEvery(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Leave(context.Background()) })
	tokens := map[string]uint64{}
	for range 3 {
		l := await(t, "OnAssigned", assigned)
		tokens[l.Name()] = l.Token()
	}

	if _, ok, err := store.Revoke(context.Background(), "g/items/b", 0); !ok || err != nil {
		t.Fatalf("Revoke = %v, %v", ok, err)
	}
	if item := await(t, "OnRevoked", revoked); item != "b" {
		t.Fatalf("OnRevoked(%s); want b", item)
	}
	if l := await(t, "b taken back", assigned); l.Name() != "g/items/b" || l.Token() <= tokens["g/items/b"] {
		t.Errorf("OnAssigned for %s token %d; want g/items/b with a token above %d", l.Name(), l.Token(), tokens["g/items/b"])
	}

	members, err := m.List(context.Background(), "g/members/")
	if err != nil || len(members) != 1 {
		t.Fatalf("List = %v, %v", members, err)
	}
	if _, ok, err := store.Revoke(context.Background(), "g/members/node", 0); !ok || err != nil {
		t.Fatalf("Revoke = %v, %v", ok, err)
	}
	poll.Until(t, "the membership taken again", patience, func() bool {
		ls, err := m.List(context.Background(), "g/members/")
		return err == nil && len(ls) == 1 && ls[0].Token > members[0].Token && ls[0].Owner == "node"
	})
	select {
	case item := <-revoked:
		t.Errorf("OnRevoked(%s) after the membership was lost; the items stay", item)
	default:
	}
	if got := mem.Owned(); len(got) != 3 {
		t.Errorf("Owned = %v; want all 3", got)
	}
}

// Closing the Manager ends every item (OnRevoked for each) and stops the
// member with ErrClosed.
func TestManagerCloseStopsTheMember(t *testing.T) {
	m := newManager(t, memory.New(), "node")
	started := make(chan string, 3)
	revoked := make(chan string, 3)
	mem, err := partition.Join(context.Background(), m, "g", []string{"a", "b", "c"}, partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) { started <- item; <-ctx.Done() },
		OnRevoked:  func(item string) { revoked <- item },
	}, partition.WithRebalanceEvery(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		await(t, "OnAssigned", started)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	await(t, "the member stopping", mem.Done())
	if err := mem.Err(); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("Err = %v; want ErrClosed", err)
	}
	for range 3 {
		await(t, "OnRevoked", revoked)
	}
	if err := mem.Leave(context.Background()); err != nil {
		t.Errorf("Leave after the member stopped = %v", err)
	}
}

// The end of Join's ctx is a Leave: everything is handed back.
func TestJoinContextEndLeaves(t *testing.T) {
	m := newManager(t, memory.New(), "node")
	ctx, cancel := context.WithCancel(context.Background())
	revoked := make(chan string, 2)
	mem, err := partition.Join(ctx, m, "g", []string{"a", "b"}, partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) { <-ctx.Done() },
		OnRevoked:  func(item string) { revoked <- item },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := mem.Owned(); len(got) != 2 {
		t.Errorf("Owned right after Join = %v; want both (Join returns after its first round)", got)
	}
	cancel()
	await(t, "the member leaving", mem.Done())
	if err := mem.Err(); err != nil {
		t.Errorf("Err = %v; want nil after leaving", err)
	}
	for range 2 {
		await(t, "OnRevoked", revoked)
	}
	if held := m.Held(); len(held) != 0 {
		t.Errorf("the Manager still holds %v", held)
	}
}
