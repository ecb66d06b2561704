package actors

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

// renewer owns the due times of the renewals a Manager makes on its own: the
// automatic ones, the pickup renewal of a hand-off, and the retries of an
// unconfirmed one. A lease actor schedules its holding's next renewal here; a
// heap ordered by due time, and one OS timer armed for the earliest, fire
// them. When renewals fall due, the renewer takes every renewal due (and
// those allowed to go a little early, to share the round trip) and sends
// them to the backend actor as RenewBatch messages of at most size renewals,
// each one round trip on a backend.BatchRenewer. The backend actor answers
// each lease actor with one BackendResult.
//
// So a renewal costs its lease actor one message, its answer, where a tick, a
// call and an answer went before; and no lease has a timer of its own for its
// renewals (its local deadline keeps its alarm, which stays exact).
//
// The lease actor still decides everything about its holding: it schedules,
// it cancels (before an explicit Renew, and when the holding ends), and it
// alone acts on the answer. A renewal the renewer has already sent cannot be
// called back: cancel says so, and the actor then treats it as the renewal in
// flight, as if it had sent it itself at that moment.
type renewer struct {
	send func(batch []messages.Renewal) // to the backend actor
	size int                            // renewals per batch, at most

	mu      sync.Mutex
	h       renewalHeap
	t       *time.Timer
	armedAt time.Time // of t; zero when t is not armed
	stopped bool

	done    chan struct{} // closed by stop
	running sync.WaitGroup
}

// renewal is one holding's next renewal, kept in its holding and reused.
// Between schedule and the send, or cancel, only the renewer touches it.
type renewal struct {
	call  messages.Renewal // what to send
	due   time.Time        // it goes by then
	early time.Time        // it may go from then on, to join a batch
	index int              // in the heap; -1 when not in it
	sent  time.Time        // when the renewer sent it (zero: not sent)
}

func newRenewer(size int, send func([]messages.Renewal)) *renewer {
	if size <= 0 {
		size = DefaultRenewBatchSize
	}
	r := &renewer{send: send, size: size, done: make(chan struct{}), t: time.NewTimer(time.Hour)}
	r.t.Stop()
	r.running.Go(r.run)
	return r
}

// run sends the renewals that are due whenever the timer fires, until stop.
func (r *renewer) run() {
	for {
		select {
		case <-r.t.C:
			r.fire()
		case <-r.done:
			return
		}
	}
}

// schedule sets n to be sent by due, or up to slack earlier when other
// renewals go then. n must not be scheduled already.
func (r *renewer) schedule(n *renewal, due time.Time, slack time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n.due, n.early, n.sent = due, due.Add(-max(slack, 0)), time.Time{}
	heap.Push(&r.h, n)
	r.rearmLocked()
}

// cancel takes n back. If the renewer has sent it already, cancel returns
// when it was sent and true: its answer will come.
func (r *renewer) cancel(n *renewal) (sent time.Time, wasSent bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n.index >= 0 {
		heap.Remove(&r.h, n.index)
		return time.Time{}, false
	}
	return n.sent, !n.sent.IsZero()
}

// sentAt is when n was sent (zero: it was not), read by its lease actor once
// the answer has come.
func (r *renewer) sentAt(n *renewal) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return n.sent
}

// rearmLocked arms the OS timer for the earliest due renewal, if that changed.
func (r *renewer) rearmLocked() {
	if r.stopped || len(r.h) == 0 {
		return
	}
	next := r.h[0].due
	if !r.armedAt.IsZero() && !next.Before(r.armedAt) {
		return // armed for that time or earlier already
	}
	r.armedAt = next
	r.t.Reset(max(time.Until(next), 0))
}

// fire sends every renewal that is due, with the ones that may go early,
// in batches of at most size.
func (r *renewer) fire() {
	var batches [][]messages.Renewal
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	now := time.Now()
	var batch []messages.Renewal
	// The heap is ordered by due time; the first renewal that may not go
	// yet ends the round (one behind it that could go early waits for the
	// next: it is never late for that).
	for len(r.h) > 0 && !r.h[0].early.After(now) {
		n := heap.Pop(&r.h).(*renewal)
		n.sent = now
		if batch == nil {
			batch = make([]messages.Renewal, 0, min(r.size, len(r.h)+1))
		}
		batch = append(batch, n.call)
		if len(batch) == r.size {
			batches, batch = append(batches, batch), nil
		}
	}
	if batch != nil {
		batches = append(batches, batch)
	}
	r.armedAt = time.Time{}
	r.rearmLocked()
	r.mu.Unlock()
	for _, b := range batches { // outside the lock: the backend actor may run right here
		r.send(b)
	}
}

// stop ends the renewer; what is scheduled is never sent.
func (r *renewer) stop() {
	r.mu.Lock()
	r.stopped = true
	r.t.Stop()
	r.mu.Unlock()
	close(r.done)
	r.running.Wait()
}

// renewalHeap orders renewals by due time (container/heap).
type renewalHeap []*renewal

func (h renewalHeap) Len() int           { return len(h) }
func (h renewalHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h renewalHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *renewalHeap) Push(x any) {
	n := x.(*renewal)
	n.index = len(*h)
	*h = append(*h, n)
}
func (h *renewalHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	old[len(old)-1] = nil
	n.index = -1
	*h = old[:len(old)-1]
	return n
}

// renewBatch (the backend actor's side) makes the renewals of one batch off
// the mailbox, in one RenewBatch round trip when the backend has it, and
// answers every lease actor. The round trip may take as long as the latest
// deadline in the batch: a lease whose own deadline passes first is lost by
// its own alarm meanwhile. A batch that fails as a whole fails every renewal
// in it, which each lease actor retries until its own local deadline, exactly
// as after a single failed renewal.
func (a *backendActor) renewBatch(batch []messages.Renewal) {
	if a.batch == nil || len(batch) == 1 { // a lone renewal needs no batch
		for _, n := range batch {
			a.run(&messages.BackendCall{Seq: n.Seq, Deadline: n.Deadline, ReplyTo: n.ReplyTo,
				Call: backend.Call{Op: backend.OpRenew, Renew: n.Renew}})
		}
		return
	}
	calls := a.callsCtx()
	a.exec(func() {
		deadline := batch[0].Deadline
		reqs := make([]backend.RenewRequest, len(batch))
		for i, n := range batch {
			reqs[i] = n.Renew
			if n.Deadline.After(deadline) {
				deadline = n.Deadline
			}
		}
		ctx, cancel := context.WithDeadline(calls, deadline)
		start := time.Now()
		results, err := renewBatch(ctx, a.batch, reqs)
		cancel()
		a.cfg.observe(opRenewBatch, start, err, nil)
		if err == nil && len(results) != len(batch) {
			err = fmt.Errorf("leasehold: backend answered %d renewals for a batch of %d", len(results), len(batch))
		}
		for i, n := range batch {
			res := messages.BackendResult{Seq: n.Seq, Op: backend.OpRenew, Err: err}
			if err == nil {
				res.Grant, res.Err = results[i].Grant, results[i].Err
			}
			a.root.Send(n.ReplyTo, &res)
		}
	})
}

// renewBatch calls b, turning a panic into a failed batch (see perform).
func renewBatch(ctx context.Context, b backend.BatchRenewer, reqs []backend.RenewRequest) (results []backend.RenewResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			results, err = nil, fmt.Errorf("%w: %v", ErrBackendPanic, r)
		}
	}()
	return b.RenewBatch(ctx, reqs)
}
