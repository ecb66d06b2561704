package partition

import (
	"context"
	"time"

	"github.com/leasehold/leasehold"
)

// holding is one item the member owns, from its acquire until OnRevoked.
type holding struct {
	item     string
	lease    *leasehold.Lease
	cancel   context.CancelFunc // ends OnAssigned's ctx: the item is handed back
	workDone func()             // OnAssigned has returned (Lease.Work)

	// Under Member.mu.
	handingBack bool
	how         string // the move that ends it, when handed back
}

// own starts owning item under l: OnAssigned runs under a ctx derived from
// the lease's (so that leasehold.LeaseFrom finds it, and a lost lease ends
// it at once), and a goroutine of the holding's waits for its end.
func (mem *Member) own(item string, l *leasehold.Lease) {
	// OnAssigned runs as the lease's Work, so that Manager.Close, too, ends
	// it and waits for it (within the grace) before the item is released.
	work, done := l.Work()
	ctx, cancel := context.WithCancel(work)
	h := &holding{item: item, lease: l, cancel: cancel, workDone: done}
	mem.mu.Lock()
	mem.held[item] = h
	mem.mu.Unlock()
	mem.metrics.moved(moveTaken)
	mem.log.Debug("partition: took an item", "item", item, "token", l.Token())
	mem.owning.Add(1)
	go mem.hold(ctx, h)
}

// handBack ends the callbacks of items, which the member gives up as how
// says; their holdings release them once the callbacks have returned.
func (mem *Member) handBack(items []string, how string) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	for _, item := range items {
		if h := mem.held[item]; h != nil && !h.handingBack {
			h.handingBack, h.how = true, how
			h.cancel()
		}
	}
}

// hold runs OnAssigned until the holding ends, then winds it down in the
// order that keeps owners from overlapping: the callback returns, then the
// lease is released, then OnRevoked, and only then may the member take the
// item again.
func (mem *Member) hold(ctx context.Context, h *holding) {
	defer mem.owning.Done()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		if mem.cb.OnAssigned != nil {
			mem.cb.OnAssigned(ctx, h.item)
		}
	}()
	<-ctx.Done()
	if h.lease.Err() == nil { // handed back: the lease is still held and renewed
		mem.await(h, returned)
	}
	<-returned
	// The work ends only now, not when OnAssigned returns: ending it ends
	// its context, and the member owns the item until that context ends.
	h.workDone()
	h.cancel()
	release(ctx, h.lease)

	mem.mu.Lock()
	how := h.how
	mem.mu.Unlock()
	if how == "" {
		how = moveLost // ended under the member: a store failure, the Manager closed
	}
	mem.log.Debug("partition: gave an item up", "item", h.item, "how", how)
	if mem.cb.OnRevoked != nil {
		mem.cb.OnRevoked(h.item)
	}
	mem.mu.Lock()
	delete(mem.held, h.item)
	mem.mu.Unlock()
	mem.metrics.moved(how)
}

// await waits for a handed-back item's callback to return, for up to the
// grace while the lease stays renewed. A callback still running then costs
// the lease its renewals: it ends at its local deadline, before the store
// lets another member take the item, instead of being released under the
// callback's feet.
func (mem *Member) await(h *holding, returned <-chan struct{}) {
	t := time.NewTimer(mem.cfg.grace)
	defer t.Stop()
	select {
	case <-returned:
	case <-h.lease.Context().Done():
	case <-t.C:
		mem.metrics.exceeded()
		mem.log.Warn("partition: a handed-back item's callback outlived the grace; its lease is left to expire",
			"item", h.item, "grace", mem.cfg.grace)
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		_ = h.lease.StopRenewing(ctx) // fails only once the lease has ended
		cancel()
	}
}
