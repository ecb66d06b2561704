package memory

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// The waiter queue of backend/queue.go: per key, the attempts that wait for
// it in order of arrival, kept by the key's shard under its lock.

// waitQueue is one key's queue.
type waitQueue struct {
	entries []qEntry
	// turn is when the head turnOf was first found with the key free: its
	// turn lasts its pickup window from then.
	turn   time.Time
	turnOf string
}

type qEntry struct {
	owner, attempt, metadata, notify string
	pickup                           time.Duration
	poll                             uint64
	expires                          time.Time
	// limit is the attempt's (1: exclusive); a hand-off goes only to an
	// entry of the key's limit (semaphore.go).
	limit int
	// turnAt is when a free slot was first found for this head of a key
	// held under a limit above 1 (its turn lasts pickup from then; zero:
	// not yet). An exclusive key keeps its head's turn in waitQueue.
	turnAt time.Time
}

func (e *qEntry) is(owner, attempt string) bool { return e.owner == owner && e.attempt == attempt }

// dropExpired removes the entries whose waiters stopped renewing them.
func (q *waitQueue) dropExpired(now time.Time) {
	live := q.entries[:0]
	for _, e := range q.entries {
		if now.Before(e.expires) {
			live = append(live, e)
		}
	}
	clear(q.entries[len(live):])
	q.entries = live
}

func (q *waitQueue) index(owner, attempt string) int {
	for i := range q.entries {
		if q.entries[i].is(owner, attempt) {
			return i
		}
	}
	return -1
}

func (q *waitQueue) removeAt(i int) qEntry {
	e := q.entries[i]
	q.entries = append(q.entries[:i], q.entries[i+1:]...)
	return e
}

// enqueueLocked puts a refused attempt in key's queue, or renews its entry,
// and reports whether it has one.
func (s *shard) enqueueLocked(key string, r backend.AcquireRequest, now time.Time) bool {
	if !r.Wait || r.Queue.EntryTTL <= 0 {
		return false
	}
	q := s.queues[key]
	if q == nil {
		q = &waitQueue{}
		s.queues[key] = q
	}
	expires := now.Add(r.Queue.EntryTTL)
	if i := q.index(r.Owner, r.Attempt); i >= 0 {
		e := &q.entries[i]
		e.expires, e.poll, e.metadata, e.notify, e.pickup, e.limit = expires, r.Queue.Poll, r.Metadata, r.Queue.Notify, r.Queue.Pickup, max(r.Limit, 1)
		return true
	}
	q.dropExpired(now)
	if len(q.entries) >= backend.MaxQueueEntries {
		return false
	}
	q.entries = append(q.entries, qEntry{
		owner: r.Owner, attempt: r.Attempt, metadata: r.Metadata, notify: r.Queue.Notify,
		pickup: r.Queue.Pickup, poll: r.Queue.Poll, expires: expires, limit: max(r.Limit, 1),
	})
	return true
}

// turnLocked applies the head's turn to an acquire of a free key: it returns
// how long the head's turn still lasts (0: the caller may be granted). A
// head that let its turn pass leaves the queue.
func (s *shard) turnLocked(key string, r backend.AcquireRequest, now time.Time) time.Duration {
	q := s.queues[key]
	if q == nil {
		return 0
	}
	q.dropExpired(now)
	if len(q.entries) == 0 || q.entries[0].is(r.Owner, r.Attempt) {
		return 0
	}
	head := &q.entries[0]
	if q.turnOf != head.attempt {
		q.turn, q.turnOf = now, head.attempt
	}
	if left := q.turn.Add(head.pickup).Sub(now); left > 0 {
		return left
	}
	q.removeAt(0)
	return 0
}

// grantedLocked takes a granted attempt's own entry out of key's queue and
// reports whether others still wait; the turn of the head, if any, is over.
func (s *shard) grantedLocked(key, owner, attempt string) (othersWait bool) {
	q := s.leaveLocked(key, owner, attempt)
	if q == nil {
		return false
	}
	q.turnOf = ""
	return true
}

// leaveLocked removes (owner, attempt)'s entry, a waiter leaving the queue,
// and returns the queue when entries remain.
func (s *shard) leaveLocked(key, owner, attempt string) *waitQueue {
	q := s.queues[key]
	if q == nil {
		return nil
	}
	if i := q.index(owner, attempt); i >= 0 {
		q.removeAt(i)
	}
	if len(q.entries) == 0 {
		delete(s.queues, key)
		return nil
	}
	return q
}

// handOnLocked is the second half of a release or revoke of key's live
// holding (already deleted): the head live entry is granted the key for its
// pickup window. It returns the notice to send, if any (ok false: the key is
// free).
func (b *Backend) handOnLocked(s *shard, key string, now time.Time) (h backend.HandOff, notify string, ok bool) {
	q := s.queues[key]
	if q == nil {
		return h, "", false
	}
	q.dropExpired(now)
	for len(q.entries) > 0 && q.entries[0].limit != 1 {
		q.removeAt(0) // waits for a slot under another limit: not this key's now
	}
	if len(q.entries) == 0 {
		delete(s.queues, key)
		return h, "", false
	}
	e := q.removeAt(0)
	q.turnOf = ""
	n := &entry{
		owner: e.owner, attempt: e.attempt, token: b.lastTok.Add(1), expires: now.Add(e.pickup),
		metadata: e.metadata, waited: len(q.entries) > 0,
	}
	if len(q.entries) == 0 {
		delete(s.queues, key)
	}
	s.leases[key] = n
	s.peak = max(s.peak, len(s.leases))
	return backend.HandOff{Key: key, Owner: e.owner, Attempt: e.attempt, Token: n.token, Poll: e.poll}, e.notify, true
}

// sweepQueuesLocked drops expired entries and empty queues.
func (s *shard) sweepQueuesLocked(now time.Time) {
	for k, q := range s.queues {
		q.dropExpired(now)
		if len(q.entries) == 0 {
			delete(s.queues, k)
		}
	}
}

// WatchHandOffs calls fn with every hand-off to addr until ctx ends.
func (b *Backend) WatchHandOffs(ctx context.Context, addr string, fn func(backend.HandOff), ready func()) error {
	b.wmu.Lock()
	id := b.nextW
	b.nextW++
	if b.handoffs[addr] == nil {
		b.handoffs[addr] = map[int]func(backend.HandOff){}
	}
	b.handoffs[addr][id] = fn
	b.wmu.Unlock()
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	b.wmu.Lock()
	delete(b.handoffs[addr], id)
	if len(b.handoffs[addr]) == 0 {
		delete(b.handoffs, addr)
	}
	b.wmu.Unlock()
	return ctx.Err()
}

// sendHandOff delivers h to addr's watchers (called with no lock held: a
// watcher may call the store).
func (b *Backend) sendHandOff(addr string, h backend.HandOff) {
	if addr == "" {
		return
	}
	b.wmu.Lock()
	fns := make([]func(backend.HandOff), 0, len(b.handoffs[addr]))
	for _, fn := range b.handoffs[addr] {
		fns = append(fns, fn)
	}
	b.wmu.Unlock()
	for _, fn := range fns {
		fn(h)
	}
}
