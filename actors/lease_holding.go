package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/messages"
)

// holding is the key held by this Manager now (states held and renewing).
type holding struct {
	h          *lease.Holding
	ttl        time.Duration
	renewEvery time.Duration
	auto       bool
	deadline   time.Time // local, monotonic: lost if no renewal is confirmed by then
	nextRenew  time.Time // zero: no renewal due (none automatic, or one in flight)
	// pickup: a hand-off, held on the store only for its pickup window
	// until a renewal gives it the TTL; that renewal is made whether or
	// not the lease renews automatically.
	pickup bool

	// The renewal in flight (state renewing).
	renewSeq     uint64
	renewSent    time.Time
	renewTTL     time.Duration
	renewReplies []chan<- error    // explicit Renew callers of the renewal in flight
	queued       []*messages.Renew // explicit Renews that arrived during one
}

// hold turns a claimed grant into the current holding and hands it over.
// deadline is its local deadline; pickup says it is a hand-off held only for
// its pickup window (lease_handoff.go).
func (a *leaseActor) hold(m *messages.Acquire, attempt string, g backend.Grant, deadline time.Time, pickup bool) {
	h := lease.NewHolding(m.Name, a.key, a.cfg.Owner, attempt, m.Metadata, g.Token, g.ExpiresAt)
	h.TTL, h.AutoRenew, h.RenewEvery = m.TTL, m.AutoRenew, m.RenewEvery
	a.cur = &holding{h: h, ttl: m.TTL, renewEvery: m.RenewEvery, auto: m.AutoRenew, deadline: deadline, pickup: pickup}
	a.state = held
	h.SetDeadline(a.cur.deadline, a.now)
	a.entry.holding.Store(h)
	a.cfg.Metrics.heldDelta(1)
	switch {
	case pickup:
		// Renew to the TTL by half of what is left of the window.
		a.cur.nextRenew = a.now.Add(deadline.Sub(a.now) / 2)
	case a.cur.auto:
		a.cur.nextRenew = a.now.Add(spread(a.cur.renewEvery))
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
	if a.state == renewing {
		c.queued = append(c.queued, m)
		return
	}
	ttl := m.TTL
	if ttl == 0 {
		ttl = c.ttl
	}
	a.startRenew(ctx, ttl, []chan<- error{m.Reply})
}

func (a *leaseActor) startRenew(ctx actor.Context, ttl time.Duration, replies []chan<- error) {
	c := a.cur
	a.state = renewing
	a.call(ctx, messages.BackendCall{
		Call: backend.Call{Op: backend.OpRenew, Renew: backend.RenewRequest{
			Key: a.key, Owner: a.cfg.Owner, Attempt: c.h.Attempt, Token: c.h.Token, TTL: ttl,
		}},
		Deadline: c.deadline,
		MaxDelay: renewBatchWait(c.renewEvery, replies),
	})
	c.renewSeq, c.renewSent, c.renewTTL, c.renewReplies = a.seq, a.now, ttl, replies
}

func (a *leaseActor) onRenewResult(ctx actor.Context, r *messages.BackendResult) {
	c := a.cur
	if a.state != renewing || r.Seq != c.renewSeq {
		return // the holding ended meanwhile
	}
	a.state = held
	a.cfg.Metrics.renewed(r.Err == nil)
	replies := c.renewReplies
	c.renewReplies = nil
	switch {
	case r.Err == nil:
		c.h.SetExpiresAt(r.Grant.ExpiresAt)
		c.deadline = localDeadline(c.renewSent, c.renewTTL)
		c.h.SetDeadline(c.deadline, a.now)
		c.pickup = false
		if c.auto {
			c.nextRenew = a.now.Add(spread(renewDelay(c.renewEvery, c.ttl, c.renewTTL)))
		}
		a.armHold()
		sendAll(replies, nil)
	case errors.Is(r.Err, backend.ErrNotHeld):
		err := a.lose(ctx, lease.ReasonRejected, r.Err)
		sendAll(replies, err)
		return
	default:
		a.cfg.Logger.Warn("leasehold: renewal not confirmed; retrying until the local deadline",
			"key", a.key, "token", c.h.Token, "left", time.Until(c.deadline), "err", r.Err)
		sendAll(replies, fmt.Errorf("leasehold: renew %q not confirmed: %w", c.h.Name, r.Err))
		if c.auto || c.pickup {
			c.nextRenew = time.Now().Add(renewRetryDelay(time.Until(c.deadline)))
			a.armHold()
		}
	}
	if q := c.queued; len(q) > 0 {
		c.queued = nil
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

// onHoldTick loses the holding at its local deadline, and otherwise starts
// the renewal that is due.
func (a *leaseActor) onHoldTick(ctx actor.Context) {
	c, now := a.cur, a.now
	if !now.Before(c.deadline) {
		a.lose(ctx, lease.ReasonExpired, lease.ErrDeadlinePassed)
		return
	}
	if !c.nextRenew.IsZero() && !now.Before(c.nextRenew) {
		c.nextRenew = time.Time{}
		if a.state == held { // else the renewal in flight schedules the next
			a.startRenew(ctx, c.ttl, nil)
		}
	}
	a.armHold()
}

// armHold arms the holding's one timer for its next event.
func (a *leaseActor) armHold() {
	c := a.cur
	if c == nil {
		return
	}
	at := c.deadline
	if !c.nextRenew.IsZero() && c.nextRenew.Before(at) {
		at = c.nextRenew
	}
	if a.holdA == nil {
		a.holdA = newAlarm(a.self, func(g uint64) any { return &messages.HoldTick{Gen: g} })
	}
	a.clock.arm(a.holdA, at)
}

// lose ends the current holding as lost, tells the subscribers, and releases
// the key in case the backend still has it (only this holding matches).
func (a *leaseActor) lose(ctx actor.Context, reason int, cause error) error {
	c := a.cur
	err := fmt.Errorf("%w: lease %q (token %d): %w", messages.ErrLost, c.h.Name, c.h.Token, cause)
	a.end(err, true)
	err = c.h.Err() // the handle may have found the deadline passed first, or been released
	a.startRelease(ctx, c.h.Attempt, c.h.Token, c.ttl, nil)
	if !errors.Is(err, messages.ErrLost) {
		return err // its caller released it first: a release is not a loss
	}
	a.cfg.Logger.Warn("leasehold: lease lost", "key", a.key, "token", c.h.Token, "err", cause)
	a.cfg.Metrics.lost(reason)
	ctx.Send(a.e.hub, &messages.Publish{Event: lease.Lost{
		Name: c.h.Name, Owner: c.h.Owner, Token: c.h.Token, Reason: reason, At: time.Now(), Err: err,
	}})
	return err
}

// end ends the current holding with err and forgets it; the caller moves the
// state on (a release follows).
func (a *leaseActor) end(err error, lost bool) {
	c := a.cur
	a.cur = nil
	a.state = idle
	a.clock.disarm(a.holdA)
	c.h.End(err, lost)
	a.entry.holding.CompareAndSwap(c.h, nil)
	a.cfg.Metrics.heldDelta(-1)
	sendAll(c.renewReplies, err)
	for _, m := range c.queued {
		m.Reply <- err
	}
}

func sendAll(replies []chan<- error, err error) {
	for _, r := range replies {
		r <- err
	}
}
