package partition_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/redis"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/internal/storetests/localstore"
	"github.com/leasehold/leasehold/partition"
	goredis "github.com/redis/go-redis/v9"
)

// The environment of the child member (TestKilledMemberChild).
const (
	killChildAddr  = "LEASEHOLD_PARTITION_CHILD_REDIS"
	killChildGroup = "LEASEHOLD_PARTITION_CHILD_GROUP"
)

const (
	killTTL       = 2 * time.Second
	killRebalance = 200 * time.Millisecond
)

func killOptions() []partition.Option {
	return []partition.Option{partition.WithTTL(killTTL), partition.WithRebalanceEvery(killRebalance), partition.WithGrace(killTTL)}
}

// A member whose process is killed (SIGKILL, on Redis) loses its items at
// their TTL, and the two members left own everything within TTL + one renew
// period + one rebalance period; none of its items is taken before its
// lease's expiry in the store.
func TestKilledMemberProcessIsTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	b := localstore.Redis(t)
	group := uniqueGroup("kill")
	f := newFleet(t, b, group, 100, killOptions()...)
	f.join(0)
	f.join(1)

	child := exec.Command(os.Args[0], "-test.run=^TestKilledMemberChild$", "-test.v")
	child.Env = append(os.Environ(), killChildAddr+"="+localstore.RedisAddr(), killChildGroup+"="+group)
	stdin, err := child.StdinPipe() // the child leaves when it closes: this process died
	if err != nil {
		t.Fatal(err)
	}
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait(); stdin.Close() })
	joined := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "joined" {
				close(joined)
				break
			}
		}
		for sc.Scan() { // drain until the child is gone
		}
	}()
	await(t, "the child joining", joined)

	// Converged: three owners of 33–34 items each, as the store lists them.
	var childItems map[string]time.Time // item → the child's expiry as last listed
	poll.Until(t, "3 processes sharing 100 items", patience, func() bool {
		ls, err := f.nodes[0].m.List(context.Background(), group+"/items/")
		if err != nil || len(ls) != 100 {
			return false
		}
		byOwner := map[string]int{}
		childItems = map[string]time.Time{}
		for _, l := range ls {
			byOwner[l.Owner]++
			if l.Owner == "child" {
				childItems[l.Name[len(group+"/items/"):]] = l.ExpiresAt
			}
		}
		for _, owner := range []string{"member-0", "member-1", "child"} {
			if n := byOwner[owner]; n < 33 || n > 34 {
				return false
			}
		}
		counts, _ := f.shares(0, 1)
		return counts[0]+counts[1] == 100-len(childItems)
	})

	if err := child.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	killed := time.Now()
	_ = child.Wait()
	poll.Until(t, "the 2 survivors sharing 100 items", patience, func() bool { return f.fair(0, 1) })
	took := time.Since(killed)
	t.Logf("the child killed: the survivors own everything %v later (TTL %v, renew %v, rebalance %v)", took, killTTL, killTTL/3, killRebalance)
	if limit := killTTL + killTTL/3 + killRebalance + time.Second; took > limit { // a second for a loaded machine
		t.Errorf("takeover took %v, more than TTL + one renew period + one rebalance period (+1s): %v", took, limit)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for item, expiry := range childItems {
		ls := f.leases[item]
		l := ls[len(ls)-1]
		// Redis's clock is this machine's: allow for its milliseconds.
		if at := f.started[l]; at.Before(expiry.Add(-5 * time.Millisecond)) {
			t.Errorf("%s: taken by %s at %v, before the child's lease expired (%v)", item, l.Owner(), at, expiry)
		}
	}
}

// TestKilledMemberChild is the member process of the test above (skipped
// unless it runs as that child): it joins the group as "child", says
// "joined", and works until it is killed, or until its stdin closes (the
// test process died).
func TestKilledMemberChild(t *testing.T) {
	group := os.Getenv(killChildGroup)
	if group == "" {
		t.Skip("the child process of TestKilledMemberProcessIsTakenOver")
	}
	c := goredis.NewClient(&goredis.Options{Addr: os.Getenv(killChildAddr), ContextTimeoutEnabled: true})
	defer c.Close()
	b, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := leasehold.New(b, leasehold.WithOwner("child"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	mem, err := partition.Join(context.Background(), m, group, fleetItems(100), partition.Callbacks{
		OnAssigned: func(ctx context.Context, item string) { <-ctx.Done() },
	}, killOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Leave(context.Background())
	fmt.Println("joined")
	_, _ = io.Copy(io.Discard, os.Stdin)
}
