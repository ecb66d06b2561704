// Command worker shows the hosted-service pattern: several workers (each its
// own Manager, as separate processes would be) compete for one lease in a
// loop; only the leader works, and a lost lease cancels its work at once.
//
// Whenever worker-2 leads, it is cut off from the backend (its renewals fail). It loses
// the lease by its local deadline, before the backend lets anyone else in,
// and another worker takes over with a higher fencing token.
//
//	go run ./examples/worker
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
)

// partitionable cuts one worker off from the shared store on demand.
type partitionable struct {
	backend.Backend
	cut atomic.Bool
}

func (p *partitionable) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if p.cut.Load() {
		return backend.Grant{}, errors.New("network partition")
	}
	return p.Backend.Renew(ctx, r)
}

// WatchReleases passes the store's release notifications through, so waiters
// wake the moment the leader steps down instead of polling.
func (p *partitionable) WatchReleases(ctx context.Context, fn func(key string)) error {
	return p.Backend.(backend.ReleaseWatcher).WatchReleases(ctx, fn)
}

func main() {
	start := time.Now()
	stamp := func() string { return fmt.Sprintf("%5.2fs", time.Since(start).Seconds()) }
	ctx, stop := context.WithTimeout(context.Background(), 4*time.Second)
	defer stop()

	store := memory.New()
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("worker-%d", i)
		link := &partitionable{Backend: store}
		m, err := leasehold.New(link, leasehold.WithOwner(name))
		if err != nil {
			log.Fatal(err)
		}
		wg.Go(func() {
			defer m.Close(context.Background())
			for ctx.Err() == nil {
				err := m.Do(ctx, "leader", func(work context.Context) error {
					l, _ := leasehold.LeaseFrom(work) // the lease Do holds
					fmt.Printf("%s %s leads (token %d)\n", stamp(), name, l.Token())
					if name == "worker-2" {
						link.cut.Store(true) // renewals stop getting through
						defer link.cut.Store(false)
					}
					select {
					case <-time.After(700 * time.Millisecond): // a unit of work
						fmt.Printf("%s %s finished its work and steps down\n", stamp(), name)
						return nil
					case <-work.Done(): // the lease was lost or ctx ended: stop now
						return context.Cause(work)
					}
				}, leasehold.WithTTL(300*time.Millisecond), leasehold.WithWait(leasehold.WaitForever))
				switch {
				case errors.Is(err, leasehold.ErrLost):
					fmt.Printf("%s %s lost the lease; its work was cancelled\n", stamp(), name)
				case err != nil && ctx.Err() == nil:
					log.Printf("%s: %v", name, err)
				}
				time.Sleep(50 * time.Millisecond) // give the others a turn
			}
		})
	}
	wg.Wait()
	fmt.Printf("%s done\n", stamp())
}
