package mysql

import (
	"slices"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// The rules of backend/queue.go and backend/limit.go, applied to one name's
// rows as a transaction read them under the name's lock (store.go). Each
// call reads the name's holdings and queue entries, changes them here, in
// memory, and writes the changes back in the same transaction: one atomic
// step on the store, as the rules require.

// hold is one holding: a row of the holds table.
type hold struct {
	token    uint64 // 0 until inserted (store.go draws it)
	owner    string
	attempt  string
	metadata string
	limit    int
	acquired int64 // microseconds on the server's clock
	expires  int64
	fresh    bool // to be inserted
	dirty    bool // expires or metadata changed
}

func (h *hold) is(owner, attempt string, token uint64) bool {
	return h.owner == owner && h.attempt == attempt && (token == 0 || h.token == token)
}

// entry is one queued attempt: a row of the queue table.
type entry struct {
	position uint64 // 0 until inserted
	owner    string
	attempt  string
	metadata string
	notify   string
	limit    int
	pickup   int64 // microseconds
	poll     uint64
	expires  int64
	turn     int64 // when its turn began (0: not yet)
	fresh    bool
	dirty    bool
}

func (e *entry) is(owner, attempt string) bool { return e.owner == owner && e.attempt == attempt }

// gone is a holding to delete; expired says it was deleted for having
// expired, which the write checks again (a renewal may have committed since
// the read).
type gone struct {
	token   uint64
	expires int64
	expired bool
}

// keyState is one name's rows and the changes a call made to them.
type keyState struct {
	key         string
	now         int64 // the server's clock, read once under the lock
	holds       []*hold
	queue       []*entry
	goneHolds   []gone
	goneEntries []uint64 // positions
	handedTo    []*hold  // holdings made by hand-offs
}

func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

func toTime(us int64) time.Time { return time.UnixMicro(us).UTC() }

func (s *keyState) in(us int64) time.Duration { return time.Duration(us-s.now) * time.Microsecond }

func (s *keyState) dropExpiredHolds() {
	s.holds = slices.DeleteFunc(s.holds, func(h *hold) bool {
		if h.expires > s.now {
			return false
		}
		s.removeHold(h, true)
		return true
	})
}

// removeHold records the deletion of h (already taken out of s.holds).
func (s *keyState) removeHold(h *hold, expired bool) {
	if !h.fresh {
		s.goneHolds = append(s.goneHolds, gone{token: h.token, expires: h.expires, expired: expired})
	}
}

func (s *keyState) dropExpiredEntries() {
	s.queue = slices.DeleteFunc(s.queue, func(e *entry) bool {
		if e.expires > s.now {
			return false
		}
		s.removeEntryRow(e)
		return true
	})
}

func (s *keyState) removeEntryRow(e *entry) {
	if !e.fresh {
		s.goneEntries = append(s.goneEntries, e.position)
	}
}

func (s *keyState) removeEntryAt(i int) *entry {
	e := s.queue[i]
	s.queue = slices.Delete(s.queue, i, i+1)
	s.removeEntryRow(e)
	return e
}

func (s *keyState) entryIndex(owner, attempt string) int {
	return slices.IndexFunc(s.queue, func(e *entry) bool { return e.is(owner, attempt) })
}

func (s *keyState) holdIndex(owner, attempt string, token uint64) int {
	return slices.IndexFunc(s.holds, func(h *hold) bool { return h.is(owner, attempt, token) })
}

// first is the live holding that ends first (s.holds must be live only).
func (s *keyState) first() *hold {
	var best *hold
	for _, h := range s.holds {
		if best == nil || h.expires < best.expires || h.expires == best.expires && h.token < best.token {
			best = h
		}
	}
	return best
}

// refusal names the holding that ends first.
func (s *keyState) refusal() backend.Grant {
	h := s.first()
	return backend.Grant{Holder: h.owner, HolderToken: h.token, HolderExpiresAt: toTime(h.expires), HolderExpiresIn: s.in(h.expires)}
}

func (s *keyState) grantNew(r backend.AcquireRequest, limit int) *hold {
	h := &hold{owner: r.Owner, attempt: r.Attempt, metadata: r.Metadata, limit: limit,
		acquired: s.now, expires: s.now + micros(r.TTL), fresh: true}
	s.holds = append(s.holds, h)
	if i := s.entryIndex(r.Owner, r.Attempt); i >= 0 {
		s.removeEntryAt(i)
	}
	s.clearTurns()
	return h
}

// clearTurns ends the heads' turns: a grant was made, and a turn counts from
// the next acquire that finds a slot free.
func (s *keyState) clearTurns() {
	for _, e := range s.queue {
		if e.turn != 0 {
			e.turn, e.dirty = 0, true
		}
	}
}

// acquire applies an Acquire; the Grant's token is filled in once the new
// holding, if any, is inserted (granted names it).
func (s *keyState) acquire(r backend.AcquireRequest) (g backend.Grant, granted *hold) {
	limit := max(r.Limit, 1)
	s.dropExpiredHolds()
	if len(s.holds) > 0 && s.holds[0].limit != limit {
		g = s.refusal()
		g.HeldLimit = s.holds[0].limit
		return g, nil
	}
	if i := s.holdIndex(r.Owner, r.Attempt, 0); i >= 0 { // the same attempt again: refresh, keep token
		h := s.holds[i]
		h.expires, h.metadata, h.dirty = s.now+micros(r.TTL), r.Metadata, true
		return backend.Grant{}, h
	}
	if limit == 1 {
		if len(s.holds) > 0 {
			g = s.refusal()
			g.Queued = s.enqueue(r)
			return g, nil
		}
		if turn := s.turn(r); turn > 0 {
			return backend.Grant{HolderExpiresAt: toTime(s.now + turn), HolderExpiresIn: s.in(s.now + turn), Queued: s.enqueue(r)}, nil
		}
		return backend.Grant{}, s.grantNew(r, 1)
	}
	if len(s.holds) > 0 {
		s.handFree(r, limit)
		if len(s.holds) >= limit {
			g = s.refusal()
			g.Queued = s.enqueue(r)
			return g, nil
		}
	}
	if turn := s.turns(r, limit-len(s.holds)); turn > 0 {
		return backend.Grant{HolderExpiresAt: toTime(s.now + turn), HolderExpiresIn: s.in(s.now + turn), Queued: s.enqueue(r)}, nil
	}
	return backend.Grant{}, s.grantNew(r, limit)
}

// enqueue puts a refused waiting attempt in the queue, or renews its entry,
// and reports whether it has one.
func (s *keyState) enqueue(r backend.AcquireRequest) bool {
	if !r.Wait || r.Queue.EntryTTL <= 0 {
		return false
	}
	expires := s.now + micros(r.Queue.EntryTTL)
	if i := s.entryIndex(r.Owner, r.Attempt); i >= 0 {
		e := s.queue[i]
		e.expires, e.poll, e.metadata, e.notify, e.pickup, e.limit = expires, r.Queue.Poll, r.Metadata, r.Queue.Notify, micros(r.Queue.Pickup), max(r.Limit, 1)
		e.dirty = true
		return true
	}
	s.dropExpiredEntries()
	if len(s.queue) >= backend.MaxQueueEntries {
		return false
	}
	s.queue = append(s.queue, &entry{owner: r.Owner, attempt: r.Attempt, metadata: r.Metadata, notify: r.Queue.Notify,
		limit: max(r.Limit, 1), pickup: micros(r.Queue.Pickup), poll: r.Queue.Poll, expires: expires, fresh: true})
	return true
}

// turn applies the head's turn to an acquire of a free exclusive name: how
// long the head's turn still lasts (0: the caller may be granted). A head
// that let its turn pass leaves the queue.
func (s *keyState) turn(r backend.AcquireRequest) int64 {
	s.dropExpiredEntries()
	if len(s.queue) == 0 || s.queue[0].is(r.Owner, r.Attempt) {
		return 0
	}
	head := s.queue[0]
	if head.turn == 0 {
		head.turn, head.dirty = s.now, true
	}
	if left := head.turn + head.pickup - s.now; left > 0 {
		return left
	}
	s.removeEntryAt(0)
	return 0
}

// turns applies the heads' turns to an acquire that finds free slots free
// (limit.go): the caller may be granted (0) when fewer than free live
// entries are ahead of it; otherwise the first free entries have their
// turn, and the answer is the shortest turn left. A head that let its turn
// pass leaves the queue.
func (s *keyState) turns(r backend.AcquireRequest, free int) int64 {
	s.dropExpiredEntries()
	for {
		pos := s.entryIndex(r.Owner, r.Attempt)
		if pos < 0 {
			pos = len(s.queue)
		}
		if pos < free {
			return 0
		}
		shortest, lapsed := int64(1<<62), -1
		for i := 0; i < free; i++ {
			e := s.queue[i]
			if e.turn == 0 {
				e.turn, e.dirty = s.now, true
			}
			left := e.turn + e.pickup - s.now
			if left <= 0 {
				lapsed = i
				break
			}
			shortest = min(shortest, left)
		}
		if lapsed < 0 {
			return shortest
		}
		s.removeEntryAt(lapsed)
	}
}

// handFree hands the free slots of a name with live holdings under limit to
// the live entries of that limit queued ahead of r's attempt, in order;
// entries of another limit, or of an attempt that holds already, are
// dropped on the way.
func (s *keyState) handFree(r backend.AcquireRequest, limit int) {
	s.dropExpiredEntries()
	for i := 0; i < len(s.queue) && len(s.holds) < limit; {
		e := s.queue[i]
		if e.is(r.Owner, r.Attempt) {
			break
		}
		s.removeEntryAt(i)
		if e.limit != limit || s.holdIndex(e.owner, e.attempt, 0) >= 0 {
			continue
		}
		s.handTo(e)
	}
}

// handTo grants the name to queued entry e (already removed) for its pickup
// window.
func (s *keyState) handTo(e *entry) {
	h := &hold{owner: e.owner, attempt: e.attempt, metadata: e.metadata, limit: e.limit,
		acquired: s.now, expires: s.now + e.pickup, fresh: true}
	s.holds = append(s.holds, h)
	s.handedTo = append(s.handedTo, h)
}

// handOn gives the slot a release or revoke of a live holding under limit
// just freed to the head live entry of that limit; entries of another limit
// are dropped on the way.
func (s *keyState) handOn(limit int) {
	s.dropExpiredEntries()
	for len(s.queue) > 0 {
		e := s.removeEntryAt(0)
		if e.limit != limit {
			continue
		}
		s.handTo(e)
		s.clearTurns()
		return
	}
}

// release applies a Release and reports whether a holding matched.
func (s *keyState) release(r backend.ReleaseRequest) bool {
	i := s.holdIndex(r.Owner, r.Attempt, r.Token)
	if i < 0 {
		if j := s.entryIndex(r.Owner, r.Attempt); j >= 0 { // a waiter leaving the queue
			s.removeEntryAt(j)
		}
		return false
	}
	h := s.holds[i]
	s.holds = slices.Delete(s.holds, i, i+1)
	s.removeHold(h, false)
	if h.expires > s.now { // an expired holding hands nothing on (queue.go)
		s.handOn(h.limit)
	}
	return true
}

// revoke applies a Revoke of token (0: the live holding that ends first).
func (s *keyState) revoke(token uint64) (backend.Holder, bool) {
	s.dropExpiredHolds()
	var h *hold
	if token == 0 {
		h = s.first()
	} else if i := slices.IndexFunc(s.holds, func(h *hold) bool { return h.token == token }); i >= 0 {
		h = s.holds[i]
	}
	if h == nil {
		return backend.Holder{}, false
	}
	out := s.holder(h)
	s.holds = slices.DeleteFunc(s.holds, func(x *hold) bool { return x == h })
	s.removeHold(h, false)
	s.handOn(h.limit)
	return out, true
}

func (s *keyState) holder(h *hold) backend.Holder {
	return backend.Holder{Key: s.key, Owner: h.owner, Token: h.token, ExpiresAt: toTime(h.expires),
		ExpiresIn: s.in(h.expires), Metadata: h.metadata, Limit: h.limit}
}
