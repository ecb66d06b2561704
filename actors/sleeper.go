package actors

import (
	"github.com/leasehold/leasehold/internal/engine"
)

// sleeper is what a held lease keeps while it sleeps: while nothing happens
// to a holding but its renewals, which the renewer makes and confirms without
// its actor, the actor is stopped and this is all that stays of it (beside
// the holding, its renewal and its alarm, which current and holdA point to).
// The router wakes the lease for the next message that comes for it (a
// command, its deadline alarm's tick, a renewal answer the renewer forwards)
// by spawning a new actor, which takes the sleeper up (newLeaseActor). Most
// of a held lease's memory was its actor and its mailbox.
type sleeper struct {
	cur      *current
	holdA    *engine.Alarm
	maxToken uint64
	seq      uint64 // of the last backend call: the next actor goes on from it
	handled  uint64
}

// maySleep offers the lease to the router's sweep to put to sleep, when it
// is held with nothing in flight, nobody waiting and nothing due, and has
// handled a command since it last reported itself.
func (a *leaseActor) maySleep() {
	c := a.cur
	if a.state != held || a.idleAt == a.handled || c == nil || c.own != nil || len(c.queued) > 0 ||
		len(a.waiters) > 0 || len(a.observers) > 0 || len(a.unconfirmed) > 0 ||
		a.rel != nil || len(a.inbox) > 0 || a.holdA == nil {
		return
	}
	a.idleAt = a.handled
	a.entry.Sleep(a.handled, &sleeper{cur: c, holdA: a.holdA, maxToken: a.maxToken, seq: a.seq, handled: a.handled})
}

// wake takes up s, left by the lease's last actor.
func (a *leaseActor) wakeFrom(s *sleeper) {
	a.state, a.cur, a.holdA, a.maxToken, a.seq = held, s.cur, s.holdA, s.maxToken, s.seq
	a.handled, a.idleAt = s.handled, s.handled
}
