package engine

import (
	"sync"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
)

// renewer owns the renewals a Manager makes on its own: the automatic ones,
// the pickup renewal of a hand-off, and the retries of an unconfirmed one. A
// lease actor hands its holding's next renewal to the renewer; from then on,
// until the actor takes it back (cancel), the renewal is the renewer's: one OS
// timer fires the due ones, the renewer sends every renewal due (and those
// allowed to go a little early, to share the round trip) to the backend in
// batches of at most size, each one RenewBatch round trip, and it handles the
// answers itself:
//
//   - a confirmed automatic renewal is written to its holding
//     (lease.Holding.Renewed) and the next one scheduled, all under one lock
//     for the whole batch: while nothing happens to a lease, its actor hears
//     nothing and runs nothing;
//   - anything else (a refusal, a failure, the pickup renewal of a
//     hand-off, an answer to a renewal the actor took back, one that came
//     after its holding ended) goes to the lease actor as a BackendResult,
//     and the actor decides, as for a renewal it made itself.
//
// The due times are kept in a timing wheel: buckets of slotWidth, found by
// slot number, and a small heap of the slot numbers in use. Scheduling,
// cancelling and sending a renewal each cost a constant few steps; a heap of
// the renewals themselves cost a pointer chase (a cache miss) per comparison,
// about twenty per renewal with ten thousand leases, which was the largest
// part of their CPU. A renewal is never sent late: a bucket is looked at from
// its first instant, and within it each renewal goes only once it may (from
// its early bound). Buckets go in slot order, so under overload the most
// overdue renewals go first.
//
// A renewal the renewer has already sent cannot be called back: cancel says
// so, and the actor then treats it as the renewal in flight, as if it had sent
// it itself at that moment; its answer goes to the actor.
type renewer struct {
	send    func(batch []sentRenewal)                    // to the backend, whose answers come to answer
	reply   func(to *entry, res *protocol.BackendResult) // Engine.sendTo
	metrics *Metrics
	size    int           // renewals per batch, at most
	window  time.Duration // the most any renewal may go early
	clock   clock.Clock
	epoch   time.Time // the origin of the slot numbers

	mu      sync.Mutex
	buckets map[int64][]*renewal // slot → the renewals due in it; none empty
	// spare is the array of a small bucket that cancel emptied, for the
	// next new bucket: a lease acquired and released before its first
	// renewal then costs the wheel no allocation.
	spare   []*renewal
	slots   slotHeap // the slots of buckets, and of some gone since
	t       clock.Timer
	armedAt time.Time // of t; zero when t is not armed
	stopped bool

	// pressure holds acquires back while renewals are answered late
	// (judged at each batch's answers).
	pressure pressure

	done    chan struct{}  // closed by stop
	running sync.WaitGroup // run
}

// slotWidth is the wheel's granularity: renewals due within one slot are
// looked at together.
const slotWidth = 10 * time.Millisecond

// renewal is one holding's next renewal, kept with its holding and reused.
// The lease actor writes the exported fields before Schedule, while the
// renewal is not the renewer's; from Schedule to cancel the renewer alone
// writes it, under its lock (Call.Seq excepted: the actor reads it, and the
// renewer never writes it).
type renewal struct {
	Call    renewCall      // what to send
	Holding *lease.Holding // what a confirmation renews
	Every   time.Duration  // see Auto

	// at is when it goes by while scheduled, and when it went once sent
	// (one field for both keeps a held lease small).
	at    time.Time
	early time.Duration // how much before at it may go, to join a batch
	slot  int64         // its bucket
	pos   int           // in its bucket; -1 when not in one
	// Auto: a confirmation is the renewer's to write, and the next renewal
	// follows Every later (up to a tenth earlier, to join a batch). Else
	// (a hand-off's pickup, a retry of a holding that does not renew by
	// itself) every answer goes to the lease actor.
	Auto  bool
	state renewalState
}

// renewalState says whose a renewal is.
type renewalState uint8

const (
	// renewalIdle: the lease actor's (never scheduled, or cancelled
	// before it went).
	renewalIdle renewalState = iota
	// renewalScheduled: in the wheel, waiting for its due time.
	renewalScheduled
	// renewalSent: in flight; the renewer handles its answer.
	renewalSent
	// renewalAnswered: sent, and its answer goes (or went) to the lease
	// actor, which took it back or must decide on it.
	renewalAnswered
)

// renewCall is what one renewal sends beside what its holding says (key,
// owner, attempt, token): Seq is echoed in its BackendResult; the round trip
// is bounded by Deadline, the holding's local deadline (an answer after it is
// useless); a BackendResult goes to the lease of entry To.
type renewCall struct {
	Seq      uint64
	TTL      time.Duration
	Deadline time.Time
	To       *entry
}

// sentRenewal is one renewal of a batch on its way: a copy of its call, taken
// when it went (the lease actor may rewrite the renewal once it takes it
// back), the request it makes, and the renewal, for the answer.
type sentRenewal struct {
	Seq      uint64
	Renew    backend.RenewRequest
	Due      time.Time // when it was due
	Deadline time.Time
	To       *entry
	n        *renewal
}

// sending is n as it goes now.
func (n *renewal) sending() sentRenewal {
	h := n.Holding
	return sentRenewal{Seq: n.Call.Seq, Due: n.at, Deadline: n.Call.Deadline, To: n.Call.To, n: n,
		Renew: backend.RenewRequest{Key: h.Key, Owner: h.Owner, Attempt: h.Attempt, Token: h.Token, TTL: n.Call.TTL}}
}

// newRenewer returns a running renewer on clock that sends batches of at most
// size renewals; window is the most a renewal may go early (the batching
// delay; 0: the default). With batches of one, nothing goes early: there is
// no round trip to share. send must not block (the backend makes the round
// trip on a goroutine of its own and hands the answers to answer); reply
// gives an answer to a lease actor.
func newRenewer(clock clock.Clock, size int, window time.Duration, send func([]sentRenewal), reply func(*entry, *protocol.BackendResult), metrics *Metrics) *renewer {
	if size <= 0 {
		size = DefaultRenewBatchSize
	}
	switch {
	case size == 1:
		window = 0
	case window <= 0:
		window = DefaultRenewBatchDelay
	}
	r := &renewer{send: send, reply: reply, metrics: metrics, size: size, window: window, clock: clock, epoch: clock.Now(),
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
	r.scheduleLocked(n, due, slack)
}

func (r *renewer) scheduleLocked(n *renewal, due time.Time, slack time.Duration) {
	if n.state == renewalScheduled {
		r.remove(n)
	}
	n.at, n.early = due, min(max(slack, 0), r.window)
	n.state = renewalScheduled
	r.add(n)
	r.rearmLocked(r.slotStart(n.slot))
}

// add puts n in its bucket. The bucket is stored before a compaction can
// run: compact keeps only the slots of the buckets stored.
func (r *renewer) add(n *renewal) {
	n.slot = r.slotOf(n.at)
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
// when it was sent and true: its answer will come to the lease actor.
func (r *renewer) cancel(n *renewal) (sent time.Time, wasSent bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch n.state {
	case renewalScheduled:
		r.remove(n)
		n.state = renewalIdle
	case renewalSent:
		n.state = renewalAnswered
	}
	if n.state != renewalAnswered {
		return time.Time{}, false
	}
	return n.at, true
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
// its answer has come to it.
func (r *renewer) sentAt(n *renewal) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n.state != renewalSent && n.state != renewalAnswered {
		return time.Time{}
	}
	return n.at
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
	var batches [][]sentRenewal
	var batch []sentRenewal
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	now := r.clock.Now()
	r.armedAt = time.Time{}
	var next time.Time // when the first renewal kept back is due
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
			if n.at.Add(-n.early).After(now) {
				n.pos = len(kept)
				kept = append(kept, n)
				if next.IsZero() || n.at.Before(next) {
					next = n.at
				}
				continue
			}
			if batch == nil {
				batch = make([]sentRenewal, 0, min(r.size, len(b)))
			}
			batch = append(batch, n.sending())
			n.pos, n.at, n.state = -1, now, renewalSent
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
	for _, b := range batches {
		r.send(b) // never blocks: this goroutine keeps the time
	}
}

// answer handles the answers to batch: results, one per renewal, or err for
// all of them. It runs on the goroutine that made the round trip.
func (r *renewer) answer(batch []sentRenewal, results []backend.RenewResult, err error) {
	// Under the lock, which confirmations are the renewer's to write, and
	// what to write (the renewal's fields are the actor's again once it takes
	// it back); then the writes, outside the lock, as each reads a holding
	// elsewhere in memory; then, under the lock again, the next renewals. A
	// renewal the actor took back meanwhile gets its answer too: the same
	// confirmation written twice changes nothing.
	type write struct {
		i     int
		h     *lease.Holding
		sent  time.Time
		every time.Duration
		ok    bool
	}
	writes := make([]write, 0, len(batch))
	var forward []int // the answers that go to their lease actors
	r.mu.Lock()
	for i, s := range batch {
		n := s.n
		if err == nil && results[i].Err == nil && n.state == renewalSent && n.Auto {
			writes = append(writes, write{i: i, h: n.Holding, sent: n.at, every: n.Every})
			continue
		}
		if n.state == renewalSent {
			n.state = renewalAnswered
		}
		forward = append(forward, i)
	}
	r.mu.Unlock()
	for k := range writes {
		w, s := &writes[k], &batch[writes[k].i]
		w.ok = w.h.Renewed(LocalDeadline(w.sent, s.Renew.TTL), results[w.i].Grant.ExpiresAt, s.Renew.TTL, w.every)
	}
	renewed := 0
	r.mu.Lock()
	now := r.clock.Now()
	late := false
	for i := range batch {
		late = late || batch[i].lateAt(now)
	}
	for _, w := range writes {
		n := batch[w.i].n
		if !w.ok || n.state != renewalSent {
			if n.state == renewalSent {
				n.state = renewalAnswered
			}
			forward = append(forward, w.i)
			continue
		}
		renewed++
		n.Call.Deadline = LocalDeadline(w.sent, batch[w.i].Renew.TTL)
		if !r.stopped {
			r.scheduleLocked(n, now.Add(Spread(w.every)), w.every/10)
		}
	}
	r.pressure.judge(now, late, len(batch) > 0)
	r.mu.Unlock()
	for range renewed {
		r.metrics.renewed(true)
	}
	for _, i := range forward {
		res := protocol.BackendResult{Seq: batch[i].Seq, Op: backend.OpRenew, Err: err, Routed: true}
		if err == nil {
			res.Grant, res.Err = results[i].Grant, results[i].Err
		}
		r.reply(batch[i].To, &res)
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
