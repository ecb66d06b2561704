package partition_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/partition"
)

// TestMembersJoiningTogetherShareAtOnce: three members that join together
// each own a third of the items within a few settling rounds, not after a
// rebalance period (one minute here: a member that took everything first
// would keep it that long); a fourth that joins later reaches its share as
// quickly.
func TestMembersJoiningTogetherShareAtOnce(t *testing.T) {
	store := memory.New()
	items := fleetItems(12)
	const within = 10 * time.Second // well below the rebalance period
	join := func(owner string) *partition.Member {
		m := newManager(t, store, owner)
		mem, err := partition.Join(context.Background(), m, "g", items, partition.Callbacks{OnAssigned: func(ctx context.Context, _ string) { <-ctx.Done() }},
			partition.WithRebalanceEvery(time.Minute))
		if err != nil {
			t.Errorf("Join %s: %v", owner, err)
			return nil
		}
		t.Cleanup(func() { _ = mem.Leave(context.Background()) })
		return mem
	}
	members := make([]*partition.Member, 3)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() { members[i] = join(fmt.Sprintf("node-%d", i)) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	fair := func(members []*partition.Member, share int) func() bool {
		return func() bool {
			for _, mem := range members {
				if len(mem.Owned()) != share {
					return false
				}
			}
			return true
		}
	}
	defer func() {
		for _, mem := range members {
			if !t.Failed() {
				break
			}
			t.Logf("owned %v members %v", mem.Owned(), mem.Members())
		}
	}()
	poll.Until(t, "3 members owning 4 items each", within, fair(members, 4))

	members = append(members, join("node-3"))
	if t.Failed() {
		return
	}
	poll.Until(t, "4 members owning 3 items each", within, fair(members, 3))
}
