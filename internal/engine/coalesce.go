package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/protocol"
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
	queued  []*protocol.BackendCall
	running int // round trips in flight

	drainFn func() // drain, made once: exec takes a func
}

// maxBatches is how many round trips one Manager keeps in flight on a batching
// backend;
// maxBatch is the most calls one carries.
const (
	maxBatches = 4
	maxBatch   = 256
)

func newCoalescer(a *backendActor) *coalescer {
	q := &coalescer{a: a}
	q.drainFn = q.drain
	return q
}

// queueKeep is the largest array an empty queue keeps: a burst must not pin
// its memory.
const queueKeep = 2 * maxBatch

// add queues m, and starts a round trip unless enough are in flight.
func (q *coalescer) add(m *protocol.BackendCall) {
	q.mu.Lock()
	q.queued = append(q.queued, m)
	start := q.running < maxBatches
	if start {
		q.running++
	}
	q.mu.Unlock()
	if start {
		q.a.exec(q.drainFn)
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
		if n == 1 { // a lone call needs no batch
			m := q.queued[0]
			q.take(1)
			q.mu.Unlock()
			q.sendOne(m)
			continue
		}
		batch := make([]*protocol.BackendCall, n)
		copy(batch, q.queued)
		q.take(n)
		q.mu.Unlock()
		q.send(batch)
	}
}

// take drops the first n queued calls, keeping the array (under mu).
func (q *coalescer) take(n int) {
	rest := copy(q.queued, q.queued[n:])
	clear(q.queued[rest:])
	q.queued = q.queued[:rest]
	if rest == 0 && cap(q.queued) > queueKeep {
		q.queued = nil
	}
}

// sendOne makes the one call m, alone, and answers it.
func (q *coalescer) sendOne(m *protocol.BackendCall) {
	a := q.a
	a.reply(m, perform(a.cfg, a.callsCtx(), false, m))
}

// send makes one round trip and answers every call in it.
func (q *coalescer) send(batch []*protocol.BackendCall) {
	a := q.a
	calls := a.callsCtx()
	// A call whose caller has gone is not sent (its acquire would only be
	// released again); the rest go together, bounded as a release is.
	live := make([]backend.Call, 0, len(batch))
	sent := batch[:0:0]
	for _, m := range batch {
		if m.Ctx != nil && m.Ctx.Err() != nil {
			a.reply(m, protocol.BackendResult{Seq: m.Seq, Op: m.Call.Op, Err: m.Ctx.Err()})
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
		a.reply(m, protocol.BackendResult{Seq: m.Seq, Op: c.Op, Grant: c.Grant, Err: c.Err})
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
