package engine

import (
	"sync"
	"time"

	"github.com/leasehold/leasehold/messages"
)

// renewer owns the due times of the renewals a Manager makes on its own: the
// automatic ones, the pickup renewal of a hand-off, and the retries of an
// unconfirmed one. A lease actor schedules its holding's next renewal here;
// one OS timer fires them. When renewals fall due, the renewer takes every
// renewal due (and those allowed to go a little early, to share the round
// trip) and sends them to the backend actor as RenewBatch messages of at most
// size renewals, each one RenewBatch round trip on the backend. The backend
// actor answers each lease actor with one BackendResult.
//
// So a renewal costs its lease actor one message, its answer, where a tick, a
// call and an answer went before; and no lease has a timer of its own for its
// renewals (its local deadline keeps its alarm, which stays exact).
//
// The due times are kept in a timing wheel: buckets of slotWidth, found by
// slot number, and a small heap of the slot numbers in use. Scheduling,
// cancelling and sending a renewal each cost a constant few steps; a heap of
// the renewals themselves cost a pointer chase (a cache miss) per comparison,
// about twenty per renewal with ten thousand leases, which was the largest
// part of their CPU. A renewal is never sent late: a bucket is looked at from
// its first instant, and within it each renewal goes only once it may (from
// its early bound).
//
// The lease actor still decides everything about its holding: it schedules,
// it cancels (before an explicit Renew, and when the holding ends), and it
// alone acts on the answer. A renewal the renewer has already sent cannot be
// called back: cancel says so, and the actor then treats it as the renewal in
// flight, as if it had sent it itself at that moment.
type renewer struct {
	send   func(batch []messages.Renewal) // to the backend actor
	size   int                            // renewals per batch, at most
	window time.Duration                  // the most any renewal may go early
	clock  Clock
	epoch  time.Time // the origin of the slot numbers

	mu      sync.Mutex
	buckets map[int64][]*renewal // slot → the renewals due in it; none empty
	// spare is the array of a small bucket that cancel emptied, for the
	// next new bucket: a lease acquired and released before its first
	// renewal then costs the wheel no allocation.
	spare   []*renewal
	slots   slotHeap // the slots of buckets, and of some gone since
	t       Timer
	armedAt time.Time // of t; zero when t is not armed
	stopped bool

	// pressure holds acquires back while renewals go out late (judged at
	// each firing).
	pressure pressure

	done    chan struct{}  // closed by stop
	running sync.WaitGroup // run
	sends   sync.WaitGroup // the goroutines posting batches
}

// slotWidth is the wheel's granularity: renewals due within one slot are
// looked at together.
const slotWidth = 10 * time.Millisecond

// renewal is one holding's next renewal, kept in its holding and reused.
// Between schedule and the send, or cancel, only the renewer writes it (its
// lease actor reads call.Seq, which the renewer never writes).
type renewal struct {
	Call  messages.Renewal // what to send (the lease actor writes it before Schedule)
	due   time.Time        // it goes by then
	early time.Time        // it may go from then on, to join a batch
	slot  int64            // its bucket
	pos   int              // in its bucket; -1 when not scheduled
	sent  time.Time        // when the renewer sent it (zero: not sent)
}

// newRenewer returns a running renewer on clock that sends batches of at most
// size renewals; window is the most a renewal may go early (the batching
// delay; 0: the default). With batches of one, nothing goes early: there is
// no round trip to share.
func newRenewer(clock Clock, size int, window time.Duration, send func([]messages.Renewal)) *renewer {
	if size <= 0 {
		size = DefaultRenewBatchSize
	}
	switch {
	case size == 1:
		window = 0
	case window <= 0:
		window = DefaultRenewBatchDelay
	}
	r := &renewer{send: send, size: size, window: window, clock: clock, epoch: clock.Now(),
		buckets: map[int64][]*renewal{}, done: make(chan struct{}), t: clock.NewTimer()}
	r.running.Go(r.run)
	return r
}

// run sends the renewals that are due whenever the timer fires, until stop.
func (r *renewer) run() {
	for {
		select {
		case <-r.t.C():
			r.fire()
		case <-r.done:
			return
		}
	}
}

// slotOf is the slot of t, rounded down (also before the epoch: a slot must
// never start after the renewals in it are due).
func (r *renewer) slotOf(t time.Time) int64 {
	d := t.Sub(r.epoch)
	s := int64(d / slotWidth)
	if d%slotWidth < 0 {
		s--
	}
	return s
}

// slotStart is the first instant of slot.
func (r *renewer) slotStart(slot int64) time.Time {
	return r.epoch.Add(time.Duration(slot) * slotWidth)
}

// schedule sets n to be sent by due, or up to slack (at most the window)
// earlier when other renewals go then. A renewal scheduled already is moved.
func (r *renewer) schedule(n *renewal, due time.Time, slack time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n.pos >= 0 {
		r.remove(n)
	}
	n.due, n.early, n.sent = due, due.Add(-min(max(slack, 0), r.window)), time.Time{}
	r.add(n)
	r.rearmLocked(r.slotStart(n.slot))
}

// add puts n in its bucket. The bucket is stored before a compaction can
// run: compact keeps only the slots of the buckets stored.
func (r *renewer) add(n *renewal) {
	n.slot = r.slotOf(n.due)
	b, ok := r.buckets[n.slot]
	if !ok && r.spare != nil {
		b, r.spare = r.spare, nil
	}
	n.pos = len(b)
	r.buckets[n.slot] = append(b, n)
	if ok {
		return
	}
	if len(r.slots) >= 2*len(r.buckets)+64 {
		r.compact() // pushes n's slot with the others
		return
	}
	r.slots.push(n.slot)
}

// spareCap is the largest bucket array kept as spare.
const spareCap = 8

// compact rebuilds slots from the buckets. A bucket emptied by cancel goes at
// once (so that leases acquired and released before their first renewal
// leave nothing behind, whatever their renewal period) but its slot stays in
// the heap until fire meets it, or until slots grows to twice the buckets.
func (r *renewer) compact() {
	r.slots = r.slots[:0]
	for slot := range r.buckets {
		r.slots.push(slot)
	}
}

// cancel takes n back. If the renewer has sent it already, cancel returns
// when it was sent and true: its answer will come.
func (r *renewer) cancel(n *renewal) (sent time.Time, wasSent bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n.pos < 0 {
		return n.sent, !n.sent.IsZero()
	}
	r.remove(n)
	return time.Time{}, false
}

// remove takes the scheduled n out of its bucket.
func (r *renewer) remove(n *renewal) {
	b := r.buckets[n.slot]
	last := b[len(b)-1]
	b[n.pos], last.pos = last, n.pos
	b[len(b)-1] = nil
	n.pos = -1
	if b = b[:len(b)-1]; len(b) == 0 {
		delete(r.buckets, n.slot)
		if cap(b) <= spareCap {
			r.spare = b
		}
	} else {
		r.buckets[n.slot] = b
	}
}

// sentAt is when n was sent (zero: it was not), read by its lease actor once
// the answer has come.
func (r *renewer) sentAt(n *renewal) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return n.sent
}

// rearmLocked arms the OS timer for at, unless it fires earlier already.
func (r *renewer) rearmLocked(at time.Time) {
	if r.stopped || (!r.armedAt.IsZero() && !at.Before(r.armedAt)) {
		return
	}
	r.armedAt = at
	r.t.ResetAt(at)
}

// fire sends every renewal that may go now, in batches of at most size, and
// re-arms for the next.
func (r *renewer) fire() {
	var batches [][]messages.Renewal
	var batch []messages.Renewal
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	now := r.clock.Now()
	r.armedAt = time.Time{}
	var next time.Time // when the first renewal kept back is due
	late, sent := false, false
	// Buckets in slot order, as long as their renewals may go early now.
	for len(r.slots) > 0 && !r.slotStart(r.slots[0]).After(now.Add(r.window)) {
		slot := r.slots[0]
		b, ok := r.buckets[slot]
		if !ok { // emptied by cancel, or met already under another entry
			r.slots.pop()
			continue
		}
		kept := b[:0]
		for _, n := range b {
			if n.early.After(now) {
				n.pos = len(kept)
				kept = append(kept, n)
				if next.IsZero() || n.due.Before(next) {
					next = n.due
				}
				continue
			}
			n.pos, n.sent = -1, now
			sent = true
			late = late || lateBy(n, now)
			if batch == nil {
				batch = make([]messages.Renewal, 0, min(r.size, len(b)))
			}
			batch = append(batch, n.Call)
			if len(batch) == r.size {
				batches, batch = append(batches, batch), nil
			}
		}
		clear(b[len(kept):])
		if len(kept) > 0 {
			// Not all of this bucket may go yet: neither may the later
			// ones'. The timer waits for the first of them to be due
			// (not for its early bound: then everything due in the
			// window after it goes with it, and batches stay full).
			r.buckets[slot] = kept
			break
		}
		delete(r.buckets, slot)
		r.slots.pop()
	}
	if batch != nil {
		batches = append(batches, batch)
	}
	r.pressure.judge(now, late, sent)
	if len(r.slots) > 0 {
		// A bucket kept back has started already (at is now or
		// earlier): the timer waits for its first due time, not for
		// at, which would fire again at once.
		at := r.slotStart(r.slots[0])
		if !next.IsZero() && (!at.After(now) || next.Before(at)) {
			at = next
		}
		r.rearmLocked(at)
	}
	r.mu.Unlock()
	// Sent from goroutines of their own, outside the lock: a goroutine
	// that sends to an idle mailbox runs it until it is empty, and the
	// backend actor's may stay busy for long under load, while this one
	// must keep the time.
	for _, b := range batches {
		r.sends.Go(func() { r.send(b) })
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
	r.sends.Wait()
}

// slotHeap is a min-heap of slot numbers.
type slotHeap []int64

func (h *slotHeap) push(s int64) {
	*h = append(*h, s)
	a := *h
	for j := len(a) - 1; j > 0; {
		i := (j - 1) / 2
		if a[i] <= a[j] {
			break
		}
		a[i], a[j] = a[j], a[i]
		j = i
	}
}

func (h *slotHeap) pop() {
	a := *h
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if j+1 < n && a[j+1] < a[j] {
			j++
		}
		if a[i] <= a[j] {
			break
		}
		a[i], a[j] = a[j], a[i]
		i = j
	}
	*h = a
}
