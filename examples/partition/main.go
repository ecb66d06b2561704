// Command partition shows package partition: workers (each its own Manager,
// as separate processes would be) share 12 named partitions on one store.
//
// Three workers join and own 4 partitions each. A fourth joins: each of the
// three hands one partition back (its work is stopped first, then its lease
// released) and the newcomer takes them, 3 each. Then worker-2's link to the
// store is cut, as if its process died: its leases end at their TTL and the
// others take its partitions over, 4 each. Last, worker-3 leaves gracefully:
// its partitions move at once, not at the TTL. Every partition's fencing
// token grows as it changes hands.
//
//	go -C examples run ./partition
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/partition"
)

const (
	ttl       = time.Second            // how long a dead worker's partitions wait
	rebalance = 100 * time.Millisecond // how often a worker looks at the group
)

var errCut = errors.New("link to the store cut")

// link is one worker's link to the shared store, which can be cut: while cut,
// no call gets through (as in examples/worker).
func link(store backend.Backend, cut *atomic.Bool) backend.Backend {
	return backend.Wrap(store, backend.Middleware{
		Call: func(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
			if !cut.Load() {
				next(ctx, calls)
				return
			}
			for i := range calls {
				calls[i].Err = errCut
			}
		},
		NonBlocking: true,
	})
}

type worker struct {
	name string
	cut  atomic.Bool
	m    *leasehold.Manager
	mem  *partition.Member
}

func main() {
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run plays the scenario, telling what happens on w.
func run(ctx context.Context, w io.Writer) error {
	start := time.Now()
	var mu sync.Mutex // one line at a time
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%5.2fs "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	store := memory.New()
	var items []string
	for i := range 12 {
		items = append(items, fmt.Sprintf("p-%02d", i))
	}
	workers := map[string]*worker{}
	join := func(name string) error {
		wk := &worker{name: name}
		m, err := leasehold.New(link(store, &wk.cut), leasehold.WithOwner(name))
		if err != nil {
			return err
		}
		wk.m = m
		wk.mem, err = partition.Join(ctx, m, "ingest", items, partition.Callbacks{
			OnAssigned: func(ctx context.Context, item string) {
				lease, _ := leasehold.LeaseFrom(ctx)
				say("%s took %s (fencing token %d)", name, item, lease.Token())
				<-ctx.Done() // the partition's work would run here, writing with the token
			},
			OnRevoked: func(item string) { say("%s gave %s up", name, item) },
		}, partition.WithTTL(ttl), partition.WithRebalanceEvery(rebalance))
		if err != nil {
			return err
		}
		workers[name] = wk
		return nil
	}
	defer func() {
		say("everyone leaves")
		for _, wk := range workers {
			_ = wk.mem.Leave(context.Background())
			_ = wk.m.Close(context.Background())
		}
	}()
	// settled waits until the named workers own every item between them,
	// each its share, and says so.
	settled := func(what string, names ...string) error {
		since := time.Now()
		for !fair(len(items), workers, names) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		var shares []string
		for _, n := range names {
			shares = append(shares, fmt.Sprintf("%s %v", n, workers[n].mem.Owned()))
		}
		say("%s: settled after %v\n       %s", what, time.Since(since).Round(10*time.Millisecond), strings.Join(shares, "\n       "))
		return nil
	}

	for _, n := range []string{"worker-1", "worker-2", "worker-3"} {
		if err := join(n); err != nil {
			return err
		}
	}
	if err := settled("three workers", "worker-1", "worker-2", "worker-3"); err != nil {
		return err
	}
	say("worker-4 joins")
	if err := join("worker-4"); err != nil {
		return err
	}
	if err := settled("four workers", "worker-1", "worker-2", "worker-3", "worker-4"); err != nil {
		return err
	}
	say("worker-2's link to the store is cut (as if it died)")
	workers["worker-2"].cut.Store(true)
	if err := settled("worker-2 gone, its partitions taken over at their TTL", "worker-1", "worker-3", "worker-4"); err != nil {
		return err
	}
	say("worker-3 leaves")
	if err := workers["worker-3"].mem.Leave(ctx); err != nil {
		return err
	}
	return settled("worker-3 left, its partitions moved at once", "worker-1", "worker-4")
}

// fair reports whether the named workers own every one of n items once
// between them, each ⌊n/M⌋ or ⌈n/M⌉.
func fair(n int, workers map[string]*worker, names []string) bool {
	lo, hi := n/len(names), (n+len(names)-1)/len(names)
	var all []string
	for _, name := range names {
		owned := workers[name].mem.Owned()
		if len(owned) < lo || len(owned) > hi {
			return false
		}
		all = append(all, owned...)
	}
	sort.Strings(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return false
		}
	}
	return len(all) == n
}
