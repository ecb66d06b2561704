package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

// coalescer, part of the backend actor, sends the calls that are ready at the
// same moment to a backend that batches (Info.Batches) in one round trip. It never waits for
// company: a call that finds fewer than maxBatches round trips in flight goes
// at once (alone, as a plain call); calls that arrive while every round trip
// is busy queue, and the next round trip to finish takes them all. So a lone
// caller pays nothing, and many callers share round trips in proportion to how
// many are waiting.
type coalescer struct {
	a *backendActor

	mu      sync.Mutex
	queued  []*messages.BackendCall
	running int // round trips in flight
}

// maxBatches is how many round trips one Manager keeps in flight on a batching
// backend;
// maxBatch is the most calls one carries.
const (
	maxBatches = 4
	maxBatch   = 256
)

func newCoalescer(a *backendActor) *coalescer { return &coalescer{a: a} }

// add queues m, and starts a round trip unless enough are in flight.
func (q *coalescer) add(m *messages.BackendCall) {
	q.mu.Lock()
	q.queued = append(q.queued, m)
	start := q.running < maxBatches
	if start {
		q.running++
	}
	q.mu.Unlock()
	if start {
		q.a.exec(q.drain)
	}
}

// drain sends what is queued, again and again, until nothing is.
func (q *coalescer) drain() {
	for {
		q.mu.Lock()
		n := min(len(q.queued), maxBatch)
		if n == 0 {
			q.running--
			q.mu.Unlock()
			return
		}
		batch := make([]*messages.BackendCall, n)
		copy(batch, q.queued)
		clear(q.queued[:n])
		q.queued = q.queued[n:]
		if len(q.queued) == 0 {
			q.queued = nil
		}
		q.mu.Unlock()
		q.send(batch)
	}
}

// send makes one round trip and answers every call in it.
func (q *coalescer) send(batch []*messages.BackendCall) {
	a := q.a
	calls := a.callsCtx()
	if len(batch) == 1 { // a lone call needs no batch
		a.reply(batch[0], perform(a.cfg, calls, false, batch[0]))
		return
	}
	// A call whose caller has gone is not sent (its acquire would only be
	// released again); the rest go together, bounded as a release is.
	live := make([]backend.Call, 0, len(batch))
	sent := batch[:0:0]
	for _, m := range batch {
		if m.Ctx != nil && m.Ctx.Err() != nil {
			a.reply(m, messages.BackendResult{Seq: m.Seq, Op: m.Call.Op, Err: m.Ctx.Err()})
			continue
		}
		live = append(live, m.Call)
		sent = append(sent, m)
	}
	ctx, cancel := context.WithTimeout(calls, releaseTimeout)
	start := time.Now()
	err := runBatch(ctx, a.cfg.Backend, live)
	cancel()
	for i, m := range sent {
		c := &live[i]
		if err != nil {
			c.Grant, c.Err = backend.Grant{}, err
		}
		a.cfg.observe(c.Op.String(), start, c.Err, m.Ctx)
		a.reply(m, messages.BackendResult{Seq: m.Seq, Op: c.Op, Grant: c.Grant, Err: c.Err})
	}
}

// runBatch calls b, turning a panic into a failed batch (see perform).
func runBatch(ctx context.Context, b backend.Backend, calls []backend.Call) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrBackendPanic, r)
		}
	}()
	b.Batch(ctx, calls)
	return nil
}
