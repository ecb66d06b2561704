package actors

import (
	"github.com/leasehold/leasehold/internal/engine"
)

// A held lease sleeps while nothing happens to it but its renewals, which
// the renewer makes and confirms without its actor: the router's sweep stops
// the actor, and the lease's current (its holding and next renewal) is all
// that stays, in its router entry, with what the actor must remember written
// in current.slept. The router wakes the lease for the next message that
// comes for it (a command, its deadline alarm's tick, a renewal answer the
// renewer forwards) by spawning a new actor, which takes it up
// (newLeaseActor). Most of a held lease's memory was its actor and mailbox.

// sleeper is what a lease actor keeps beside its current holding and must
// hand to the actor that wakes the lease.
type sleeper struct {
	holdA    *engine.Alarm
	maxToken uint64
	seq      uint64 // of the last backend call: the next actor goes on from it
	handled  uint64
}

// maySleep offers the lease to the router's sweep to put to sleep, when it
// is held with nothing in flight, nobody waiting and nothing due, and has
// handled a command since it last reported itself.
func (a *leaseActor) maySleep() {
	// (Held, the actor has a current holding and its armed alarm.)
	c := a.cur
	if a.state != held || a.idleAt == a.handled || c.own != nil ||
		len(a.waiters) > 0 || len(a.observers) > 0 || len(a.unconfirmed) > 0 ||
		a.rel != nil || len(a.inbox) > 0 {
		return
	}
	a.idleAt = a.handled
	c.slept = sleeper{holdA: a.holdA, maxToken: a.maxToken, seq: a.seq, handled: a.handled}
	a.entry.Sleep(a.handled, c)
}

// wakeFrom takes up c, the current holding of a lease put to sleep.
func (a *leaseActor) wakeFrom(c *current) {
	s := c.slept
	c.slept = sleeper{}
	a.state, a.cur, a.holdA, a.maxToken, a.seq = held, c, s.holdA, s.maxToken, s.seq
	a.handled, a.idleAt = s.handled, s.handled
}
