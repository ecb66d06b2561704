package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/engine"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// current is the key's holding by this Manager now (states held and
// renewing): the holding itself and what the actor keeps to renew it.
type current struct {
	h          *lease.Holding
	ttl        time.Duration
	renewEvery time.Duration
	auto       bool
	// handOff: a hand-off, held on the store only for its pickup window
	// until a renewal gives it the TTL; that renewal is made whether or
	// not the lease renews automatically.
	handOff bool

	// next is the renewal this actor has handed to the renewer (Call.Seq
	// is 0 when there is none): scheduled, or sent and not yet answered.
	// The renewer writes the confirmations of automatic renewals to h
	// itself; h's local deadline is the one this actor reads.
	next engine.Renewal

	own *ownRenewal // the renewal in flight (state renewing)

	slept sleeper // what the actor left here when it was put to sleep (sleeper.go)
}

// ownRenewal is a renewal this actor awaits the answer to: one it sent (an
// explicit Renew), or one the renewer sent that the actor took back or must
// decide on. Made only then: most holdings never have one.
type ownRenewal struct {
	seq     uint64
	sent    time.Time
	ttl     time.Duration
	replies []chan<- error    // explicit Renew callers
	queued  []*messages.Renew // explicit Renews that arrived during it
}

// hold turns a claimed grant into the current holding and hands it over.
// deadline is its local deadline; handOff says it is held only for
// its pickup window (lease_handoff.go).
func (a *leaseActor) hold(m *messages.Acquire, attempt string, g backend.Grant, deadline time.Time, handOff bool) {
	h := lease.NewHolding(m.Name, a.key, a.cfg.Owner, attempt, m.Metadata, g.Token, g.ExpiresAt, a.cfg.Now())
	h.AutoRenew = m.AutoRenew
	h.Route, h.Limit = a.entry.Key(), int32(max(m.Limit, 1))
	a.cur = &current{h: h, ttl: m.TTL, renewEvery: m.RenewEvery, auto: m.AutoRenew, handOff: handOff,
		next: engine.NewRenewal()}
	a.state = held
	h.Confirm(deadline, a.now, m.TTL, m.RenewEvery)
	a.entry.SetHolding(h)
	a.cfg.Metrics.HeldDelta(1, h.Limit > 1)
	switch {
	case handOff:
		// Renew to the TTL by half of what is left of the window.
		a.scheduleRenewal(a.now.Add(deadline.Sub(a.now)/2), 0)
	case a.cur.auto:
		a.scheduleRenewal(a.now.Add(engine.Spread(a.cur.renewEvery)), a.renewSlack())
	}
	a.armHold()
	m.Reply <- messages.AcquireReply{Holding: h}
}

func (a *leaseActor) onRenew(ctx actor.Context, m *messages.Renew) {
	c := a.cur
	if c == nil || c.h.Token != m.Token {
		m.Reply <- messages.ErrStale
		return
	}
	a.takeBackRenewal()
	if a.state == renewing {
		c.own.queued = append(c.own.queued, m)
		return
	}
	ttl := m.TTL
	if ttl == 0 {
		ttl = c.ttl
	}
	a.startRenew(ctx, ttl, []chan<- error{m.Reply})
}

// onStopRenewing turns the holding's automatic renewals off, the pickup
// renewal of a hand-off included: what is left of it is its local deadline.
func (a *leaseActor) onStopRenewing(m *messages.StopRenewing) {
	c := a.cur
	if c == nil || c.h.Token != m.Token {
		m.Reply <- messages.ErrStale
		return
	}
	c.auto, c.handOff = false, false
	a.takeBackRenewal()
	m.Reply <- nil
}

func (a *leaseActor) startRenew(ctx actor.Context, ttl time.Duration, replies []chan<- error) {
	c := a.cur
	a.mayShorten(a.now, ttl)
	a.call(ctx, protocol.BackendCall{
		Call: backend.Call{Op: backend.OpRenew, Renew: backend.RenewRequest{
			Key: a.key, Owner: a.cfg.Owner, Attempt: c.h.Attempt, Token: c.h.Token, TTL: ttl,
		}},
		Deadline: c.h.Deadline(),
	})
	a.renewing(a.seq, a.now, ttl, replies)
}

// renewing moves to state renewing, with the renewal seq, sent at sent, in
// flight.
func (a *leaseActor) renewing(seq uint64, sent time.Time, ttl time.Duration, replies []chan<- error) {
	a.state = renewing
	a.cur.own = &ownRenewal{seq: seq, sent: sent, ttl: ttl, replies: replies}
}

// scheduleRenewal hands the holding's next engine.Renewal to the renewer: it goes by
// due, or up to slack earlier to share a round trip with others.
func (a *leaseActor) scheduleRenewal(due time.Time, slack time.Duration) {
	c := a.cur
	a.mayShorten(due.Add(-slack), c.ttl) // it is sent no earlier (the renewer may cap slack)
	a.seq++
	n := &c.next
	n.Call.Seq, n.Call.To, n.Call.Deadline, n.Call.TTL = a.seq, a.entry, c.h.Deadline(), c.ttl
	n.Holding, n.Every = c.h, c.renewEvery // the renewal's key, owner, attempt and token are the holding's
	n.Auto = c.auto && !c.handOff          // a hand-off's pickup renewal is this actor's to confirm
	a.renewer.Schedule(n, due, slack)
}

// mayShorten lowers the local deadline to what a renewal of ttl, sent at
// sent or later, leaves on the store if it is applied and its answer lost: a
// TTL shorter than the one confirmed last shortens the lease, and the holder
// must not outlive what the store may hold. (Renewals of the same TTL never
// lower it: they are sent after the one that set it.)
func (a *leaseActor) mayShorten(sent time.Time, ttl time.Duration) {
	c := a.cur
	if d := engine.LocalDeadline(sent, ttl); d.Before(c.h.Deadline()) {
		c.h.SetDeadline(d)
		a.armHold()
	}
}

// takeBackRenewal cancels the renewal handed to the renewer, if any. One the
// renewer has sent already is the renewal in flight from then on (state
// renewing), its answer awaited like any other.
func (a *leaseActor) takeBackRenewal() {
	c := a.cur
	if c.next.Call.Seq == 0 {
		return
	}
	if sent, wasSent := a.renewer.Cancel(&c.next); wasSent {
		a.renewing(c.next.Call.Seq, sent, c.ttl, nil)
	}
	c.next.Call.Seq = 0
}

// renewSlack is how early an automatic renewal may go to join a batch: a
// tenth of the renewal period (the spread shortens periods by as much). The
// renewer caps it at the batching delay.
func (a *leaseActor) renewSlack() time.Duration { return a.cur.renewEvery / 10 }

func (a *leaseActor) onRenewResult(ctx actor.Context, r *protocol.BackendResult) {
	c := a.cur
	if c != nil && a.state == held && r.Seq == c.next.Call.Seq {
		// The answer to the renewal the renewer sent.
		a.renewing(r.Seq, a.renewer.SentAt(&c.next), c.ttl, nil)
		c.next.Call.Seq = 0
	}
	if a.state != renewing || r.Seq != c.own.seq {
		return // the holding ended meanwhile
	}
	a.state = held
	a.cfg.Metrics.Renewed(r.Err == nil)
	own := c.own
	c.own = nil
	replies := own.replies
	switch {
	case r.Err == nil:
		c.h.SetExpiresAt(r.Grant.ExpiresAt)
		every := engine.RenewDelay(c.renewEvery, c.ttl, own.ttl)
		c.h.Confirm(engine.LocalDeadline(own.sent, own.ttl), a.now, own.ttl, every)
		c.handOff = false
		if c.auto && len(own.queued) == 0 { // else the queued renewal schedules it
			a.scheduleRenewal(a.now.Add(engine.Spread(every)), a.renewSlack())
		}
		a.armHold()
		sendAll(replies, nil)
	case errors.Is(r.Err, backend.ErrNotHeld):
		err := a.lose(ctx, lease.ReasonRejected, r.Err)
		sendAll(replies, err)
		for _, m := range own.queued {
			m.Reply <- err
		}
		return
	default:
		now, deadline := a.cfg.Time().Now(), c.h.Deadline()
		a.cfg.Logger.Warn("leasehold: renewal not confirmed; retrying until the local deadline",
			"key", a.key, "token", c.h.Token, "left", deadline.Sub(now), "err", r.Err)
		sendAll(replies, fmt.Errorf("leasehold: renew %q not confirmed: %w", c.h.Name, r.Err))
		if (c.auto || c.handOff) && len(own.queued) == 0 {
			a.scheduleRenewal(now.Add(engine.RenewRetryDelay(deadline.Sub(now))), 0)
		}
	}
	if q := own.queued; len(q) > 0 {
		ttl := q[len(q)-1].TTL
		if ttl == 0 {
			ttl = c.ttl
		}
		rs := make([]chan<- error, len(q))
		for i, m := range q {
			rs[i] = m.Reply
		}
		a.startRenew(ctx, ttl, rs)
	}
}

// onHoldTick loses the holding at its local deadline, unless a renewal the
// renewer confirmed has moved the deadline on: then it arms again. (A tick
// comes only from the latest arming; the holding's own check and the
// renewer's confirmation are one step each, so the two never disagree on
// whether the deadline passed.)
func (a *leaseActor) onHoldTick(ctx actor.Context) {
	if a.cur.h.Err() != nil { // the deadline passed (Err ends it as lost then), or the handle released it
		a.lose(ctx, lease.ReasonExpired, lease.ErrDeadlinePassed)
		return
	}
	a.armHold()
}

// armHold arms the holding's alarm for its local deadline, which it follows
// as the renewer moves it on. (Its renewals are the renewer's.)
func (a *leaseActor) armHold() {
	if a.holdA == nil {
		a.holdA = engine.NewAlarm(a.entry, func(g uint64) any { return &protocol.HoldTick{Gen: g} })
	}
	a.clock.ArmDeadline(a.holdA, a.cur.h)
}

// lose ends the current holding as lost, tells the subscribers, and releases
// the key in case the backend still has it (only this holding matches).
func (a *leaseActor) lose(ctx actor.Context, reason lease.Reason, cause error) error {
	c := a.cur
	err := fmt.Errorf("%w: lease %q (token %d): %w", messages.ErrLost, c.h.Name, c.h.Token, cause)
	a.end(err, true)
	err = c.h.Err() // the handle may have found the deadline passed first, or been released
	a.startRelease(ctx, c.h.Attempt, c.h.Token, c.ttl, nil)
	if !errors.Is(err, messages.ErrLost) {
		return err // its caller released it first: a release is not a loss
	}
	a.cfg.Logger.Warn("leasehold: lease lost", "key", a.key, "token", c.h.Token, "err", cause)
	a.cfg.Metrics.Lost(reason)
	ctx.Send(a.e.Hub(), &protocol.Publish{Event: lease.Lost{
		Name: c.h.Name, Owner: c.h.Owner, Token: c.h.Token, Reason: reason, At: a.cfg.Time().Now(), Err: err,
	}})
	return err
}

// end ends the current holding with err and forgets it; the caller moves the
// state on (a release follows).
func (a *leaseActor) end(err error, lost bool) {
	c := a.cur
	if c.next.Call.Seq != 0 {
		a.renewer.Cancel(&c.next) // an answer already on its way is stale
	}
	a.cur = nil
	a.state = idle
	a.clock.Disarm(a.holdA)
	c.h.End(err, lost)
	a.entry.ClearHolding(c.h)
	a.cfg.Metrics.HeldDelta(-1, c.h.Limit > 1)
	if c.own != nil {
		sendAll(c.own.replies, err)
		for _, m := range c.own.queued {
			m.Reply <- err
		}
	}
}

func sendAll(replies []chan<- error, err error) {
	for _, r := range replies {
		r <- err
	}
}
