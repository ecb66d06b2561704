package memory

import (
	"slices"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Keys with several holders (backend/limit.go): a key acquired with Limit n
// > 1 keeps its holdings in a semaphore instead of the shard's one-holding
// map, so that the exclusive path is the same code as before. A key is in
// at most one of the two with live holdings: an acquire under the other
// limit is refused with HeldLimit.

// semaphore is one key's holdings under a limit above 1.
type semaphore struct {
	limit int
	holds []*entry // live or expired; dropExpired removes the expired
	// waited: a refused acquire will wait: announce every release (as
	// entry.waited does for an exclusive key).
	waited bool
}

func (m *semaphore) dropExpired(now time.Time) {
	m.holds = slices.DeleteFunc(m.holds, func(e *entry) bool { return !now.Before(e.expires) })
}

// find returns the index of the holding named by owner, attempt and token
// (0: any token of that attempt), or -1.
func (m *semaphore) find(owner, attempt string, token uint64) int {
	return slices.IndexFunc(m.holds, func(e *entry) bool { return e.is(owner, attempt, token) })
}

// first is the index of the live holding that ends first (holds must have
// only live ones), or -1 when there is none.
func (m *semaphore) first() int {
	best := -1
	for i, e := range m.holds {
		if best < 0 || e.expires.Before(m.holds[best].expires) {
			best = i
		}
	}
	return best
}

// refusal is the answer to an acquire that finds every slot taken: the
// holding that ends first stands in the way.
func (m *semaphore) refusal(now time.Time) backend.Grant {
	e := m.holds[m.first()]
	return backend.Grant{Holder: e.owner, HolderToken: e.token, HolderExpiresAt: e.expires, HolderExpiresIn: e.expires.Sub(now)}
}

// liveSemLocked returns key's semaphore with its expired holdings dropped,
// or nil when it has no live holding (and forgets it then).
func (s *shard) liveSemLocked(key string, now time.Time) *semaphore {
	m := s.sems[key]
	if m == nil {
		return nil
	}
	m.dropExpired(now)
	if len(m.holds) == 0 {
		delete(s.sems, key)
		return nil
	}
	return m
}

// acquireSemLocked is Acquire with r.Limit > 1, and the hand-offs it made
// (to be sent once the shard is unlocked).
func (b *Backend) acquireSemLocked(s *shard, r backend.AcquireRequest, now time.Time) (g backend.Grant, hs []pendingHandOff) {
	if e := s.leases[r.Key]; e != nil {
		if now.Before(e.expires) { // an exclusive holding: limit 1
			return backend.Grant{Holder: e.owner, HolderToken: e.token, HolderExpiresAt: e.expires, HolderExpiresIn: e.expires.Sub(now), HeldLimit: 1}, nil
		}
		s.deleteLocked(r.Key)
	}
	m := s.liveSemLocked(r.Key, now)
	if m != nil {
		if m.limit != r.Limit {
			g := m.refusal(now)
			g.HeldLimit = m.limit
			return g, nil
		}
		if i := m.find(r.Owner, r.Attempt, 0); i >= 0 { // the same attempt again: refresh, keep token
			e := m.holds[i]
			e.expires, e.metadata = now.Add(r.TTL), r.Metadata
			return backend.Grant{Acquired: true, Token: e.token, ExpiresAt: e.expires}, nil
		}
		hs = b.handFreeSemLocked(s, r, m, now)
		if len(m.holds) >= r.Limit {
			m.waited = m.waited || r.Wait
			g := m.refusal(now)
			g.Queued = s.enqueueLocked(r.Key, r, now)
			return g, hs
		}
	}
	free := r.Limit
	if m != nil {
		free -= len(m.holds)
	}
	if turn := s.semTurnLocked(r.Key, r, free, now); turn > 0 { // heads of the queue have their turn
		if m != nil {
			m.waited = m.waited || r.Wait
		}
		queued := s.enqueueLocked(r.Key, r, now)
		return backend.Grant{HolderExpiresAt: now.Add(turn), HolderExpiresIn: turn, Queued: queued}, hs
	}
	if m == nil {
		m = &semaphore{limit: r.Limit}
		s.sems[r.Key] = m
	}
	e := &entry{owner: r.Owner, attempt: r.Attempt, token: b.lastTok.Add(1), expires: now.Add(r.TTL), metadata: r.Metadata}
	if q := s.leaveLocked(r.Key, r.Owner, r.Attempt); q != nil {
		m.waited = true
		q.clearTurns()
	}
	m.holds = append(m.holds, e)
	return backend.Grant{Acquired: true, Token: e.token, ExpiresAt: e.expires}, hs
}

// pendingHandOff is a hand-off made under a shard's lock, to be sent to
// addr once it is unlocked.
type pendingHandOff struct {
	addr string
	h    backend.HandOff
}

// handFreeSemLocked hands the free slots of key's semaphore m (which has
// live holdings) to the live entries of its limit queued ahead of r's
// attempt, in order, each for its pickup window, as a release hands on its
// slot: the heads need not poll for a slot that expiry freed, which on a
// busy name they may never do while the other slots are handed on to them.
// Entries of another limit ahead are dropped, as a release drops them.
func (b *Backend) handFreeSemLocked(s *shard, r backend.AcquireRequest, m *semaphore, now time.Time) []pendingHandOff {
	q := s.queues[r.Key]
	if q == nil || len(m.holds) >= m.limit {
		return nil
	}
	q.dropExpired(now)
	var hs []pendingHandOff
	for i := 0; i < len(q.entries) && len(m.holds) < m.limit; {
		e := &q.entries[i]
		if e.is(r.Owner, r.Attempt) {
			break // the caller's own place: it is granted as usual
		}
		if e.limit != m.limit || m.find(e.owner, e.attempt, 0) >= 0 {
			q.removeAt(i)
			continue
		}
		w := q.removeAt(i)
		n := &entry{owner: w.owner, attempt: w.attempt, token: b.lastTok.Add(1), expires: now.Add(w.pickup), metadata: w.metadata}
		m.holds = append(m.holds, n)
		hs = append(hs, pendingHandOff{w.notify, backend.HandOff{Key: r.Key, Owner: w.owner, Attempt: w.attempt, Token: n.token, Poll: w.poll}})
	}
	if len(q.entries) == 0 {
		delete(s.queues, r.Key)
	} else if len(hs) > 0 {
		m.waited = true
	}
	return hs
}

// semTurnLocked applies the heads' turns to an acquire that finds free slots
// free of key: the caller may be granted (0) when fewer than free live
// entries are ahead of it; otherwise the first free entries have their
// turn, each for its pickup window from when a slot was first found free
// for it, and the answer is the shortest turn left. A head that let its
// turn pass leaves the queue.
func (s *shard) semTurnLocked(key string, r backend.AcquireRequest, free int, now time.Time) time.Duration {
	q := s.queues[key]
	if q == nil {
		return 0
	}
	q.dropExpired(now)
	for {
		pos := q.index(r.Owner, r.Attempt)
		if pos < 0 {
			pos = len(q.entries)
		}
		if pos < free {
			return 0
		}
		shortest, lapsed := time.Duration(1<<62), -1
		for i := 0; i < free; i++ {
			e := &q.entries[i]
			if e.turnAt.IsZero() {
				e.turnAt = now
			}
			left := e.turnAt.Add(e.pickup).Sub(now)
			if left <= 0 {
				lapsed = i
				break
			}
			shortest = min(shortest, left)
		}
		if lapsed < 0 {
			return shortest
		}
		q.removeAt(lapsed)
	}
}

// clearTurns ends the heads' turns: a grant was made, and a turn counts
// from the next acquire that finds a slot free.
func (q *waitQueue) clearTurns() {
	for i := range q.entries {
		q.entries[i].turnAt = time.Time{}
	}
}

// renewSemLocked is Renew of a key held under a limit above 1.
func (s *shard) renewSemLocked(now time.Time, r backend.RenewRequest) (backend.Grant, bool) {
	m := s.sems[r.Key]
	if m == nil {
		return backend.Grant{}, false
	}
	i := m.find(r.Owner, r.Attempt, r.Token)
	if i < 0 || !now.Before(m.holds[i].expires) {
		return backend.Grant{}, false
	}
	e := m.holds[i]
	e.expires = now.Add(r.TTL)
	return backend.Grant{Acquired: true, Token: e.token, ExpiresAt: e.expires}, true
}

// releaseSemLocked ends the holding of key's semaphore named by r, if any,
// and hands its slot on when it was live. found reports whether there was
// such a holding; announce whether the release is to be announced (nobody
// was handed the slot, somebody waits).
func (b *Backend) releaseSemLocked(s *shard, r backend.ReleaseRequest, now time.Time) (found, announce bool, h backend.HandOff, addr string, handed bool) {
	m := s.sems[r.Key]
	if m == nil {
		return false, false, h, "", false
	}
	i := m.find(r.Owner, r.Attempt, r.Token)
	if i < 0 {
		return false, false, h, "", false
	}
	e := m.holds[i]
	m.holds = slices.Delete(m.holds, i, i+1)
	if now.Before(e.expires) {
		h, addr, handed = b.handOnSemLocked(s, r.Key, m, now)
	}
	announce = !handed && m.waited
	if len(m.holds) == 0 {
		delete(s.sems, r.Key)
	}
	return true, announce, h, addr, handed
}

// handOnSemLocked gives the slot a release or revoke of a live holding of key
// just freed to the head live entry of the queue under the same limit;
// entries of another limit are dropped on the way (they cannot be served
// while this limit stands). ok false: the slot is free.
func (b *Backend) handOnSemLocked(s *shard, key string, m *semaphore, now time.Time) (h backend.HandOff, notify string, ok bool) {
	q := s.queues[key]
	if q == nil {
		return h, "", false
	}
	q.dropExpired(now)
	for len(q.entries) > 0 {
		e := q.removeAt(0)
		if e.limit != m.limit {
			continue
		}
		n := &entry{owner: e.owner, attempt: e.attempt, token: b.lastTok.Add(1), expires: now.Add(e.pickup), metadata: e.metadata}
		m.holds = append(m.holds, n)
		m.waited = m.waited || len(q.entries) > 0
		q.clearTurns()
		if len(q.entries) == 0 {
			delete(s.queues, key)
		}
		return backend.HandOff{Key: key, Owner: e.owner, Attempt: e.attempt, Token: n.token, Poll: e.poll}, e.notify, true
	}
	delete(s.queues, key)
	return h, "", false
}

// revokeSemLocked ends the live holding of key's semaphore of token (0: the
// one that ends first) and hands its slot on.
func (b *Backend) revokeSemLocked(s *shard, key string, token uint64, now time.Time) (removed backend.Holder, ok bool, h backend.HandOff, addr string, handed bool) {
	m := s.liveSemLocked(key, now)
	if m == nil {
		return removed, false, h, "", false
	}
	i := m.first()
	if token != 0 {
		i = slices.IndexFunc(m.holds, func(e *entry) bool { return e.token == token })
	}
	if i < 0 {
		return removed, false, h, "", false
	}
	removed = m.holds[i].holding(key, now, m.limit)
	m.holds = slices.Delete(m.holds, i, i+1)
	h, addr, handed = b.handOnSemLocked(s, key, m, now)
	if len(m.holds) == 0 {
		delete(s.sems, key)
	}
	return removed, true, h, addr, handed
}

// semHoldersLocked lists key's live holdings under a limit above 1, in token
// order.
func (s *shard) semHoldersLocked(key string, now time.Time) []backend.Holder {
	m := s.liveSemLocked(key, now)
	if m == nil {
		return nil
	}
	out := make([]backend.Holder, 0, len(m.holds))
	for _, e := range m.holds {
		out = append(out, e.holding(key, now, m.limit))
	}
	slices.SortFunc(out, func(a, b backend.Holder) int { return cmpToken(a.Token, b.Token) })
	return out
}

func cmpToken(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
