// Command worker shows the hosted-service pattern: two workers (each its own
// Manager, as two processes would be) take turns at one lease; only the
// leader works, and a lost lease cancels its work at once.
//
// Whenever worker-2 leads, its link to the store is cut: its renewals fail.
// It gives the lease up at its local deadline, a margin (a tenth of the TTL)
// before the store lets anyone else in, and worker-1 takes over with a higher
// fencing token. A worker that has had its turn steps aside for a moment, so
// that the other one, already waiting, gets the next turn.
//
//	go -C examples run ./worker
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
)

const (
	ttl     = 500 * time.Millisecond // lost 50ms (a tenth) before the store frees it
	work    = 600 * time.Millisecond // one unit of work
	stepOut = 100 * time.Millisecond // after a turn, let the waiting worker in
)

var errPartition = errors.New("network partition")

// link is one worker's link to the shared store, which can be cut: while cut,
// no call gets through. backend.Wrap keeps what the store can do (release
// notifications wake waiters at once; batched renewals), so the engine works
// through the link as on the store itself.
func link(store backend.Backend, cut *atomic.Bool) backend.Backend {
	return backend.Wrap(store, backend.Middleware{
		Call: func(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
			if !cut.Load() {
				next(ctx, calls)
				return
			}
			for i := range calls {
				calls[i].Err = errPartition
			}
		},
		NonBlocking: true, // it never waits: the memory store stays Inline
	})
}

func main() {
	ctx, stop := context.WithTimeout(context.Background(), 4*time.Second)
	defer stop()
	run(ctx, os.Stdout)
}

// run lets the workers take turns until ctx ends, telling what happens on w.
func run(ctx context.Context, w io.Writer) {
	start := time.Now()
	var mu sync.Mutex // one line at a time, in the order things happen
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%5.2fs "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	store := memory.New()
	var wg sync.WaitGroup
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("worker-%d", i)
		var cut atomic.Bool
		m, err := leasehold.New(link(store, &cut), leasehold.WithOwner(name))
		if err != nil {
			log.Fatal(err)
		}
		wg.Go(func() {
			defer m.Close(context.Background())
			for ctx.Err() == nil {
				err := m.Do(ctx, "leader", func(job context.Context) error {
					l, _ := leasehold.LeaseFrom(job) // the lease Do holds
					if name == "worker-2" {
						cut.Store(true) // from now on nothing gets through
						defer cut.Store(false)
						say("%s leads (token %d), and its link to the store is cut", name, l.Token())
					} else {
						say("%s leads (token %d)", name, l.Token())
					}
					select {
					case <-time.After(work):
						say("%s finished its work and steps down", name)
						return nil
					case <-job.Done(): // lost, or the run is over: stop now
						if errors.Is(context.Cause(job), leasehold.ErrLost) {
							say("%s lost the lease at its local deadline; its work is cancelled", name)
						}
						return context.Cause(job)
					}
				}, leasehold.WithTTL(ttl), leasehold.WithWait(leasehold.WaitForever))
				if err != nil && !errors.Is(err, leasehold.ErrLost) && ctx.Err() == nil {
					log.Printf("%s: %v", name, err)
				}
				select { // step aside: the other worker is waiting for its turn
				case <-time.After(stepOut):
				case <-ctx.Done():
				}
			}
		})
	}
	wg.Wait()
	say("done")
}
