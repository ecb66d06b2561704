package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/messages"
)

// op is the ownership-changing backend call in flight, if any. At most one runs
// at a time per key, so a release always completes before the next acquire
// (otherwise the same owner's acquire would refresh the old holding and keep
// its fencing token).
type op int

const (
	opNone op = iota
	opAcquiring
	opReleasing
)

// waiter is one Acquire in the FIFO queue.
type waiter struct {
	m        *messages.Acquire
	attempt  string    // its acquire attempt's identity, made when it first asks the backend
	deadline time.Time // zero: no deadline of its own
	timer    scheduler.CancelFunc
	attempts int // refusals so far, for poll backoff
}

// holding is the key held by this Manager now.
type holding struct {
	h          *messages.Holding
	ttl        time.Duration
	renewEvery time.Duration
	auto       bool
	deadline   time.Time // local, monotonic: lost if no renewal is confirmed by then
	nextRenew  time.Time // zero: no renewal due (none automatic, or one in flight)

	renewing     bool
	renewSeq     uint64
	renewSent    time.Time
	renewTTL     time.Duration
	renewReplies []chan<- error    // explicit Renew callers of the renewal in flight
	queued       []*messages.Renew // explicit Renews that arrived during one
}

// leaseActor owns the state machine of one key. See package doc.
type leaseActor struct {
	cfg      *Config
	key      string
	registry *actor.PID
	stopped  func() // called once the actor has stopped
	backend  *actor.PID
	hub      *actor.PID
	self     *actor.PID
	timers   *scheduler.TimerScheduler

	handled  uint64 // commands received from the registry
	idleAt   uint64 // handled when Idle was last reported
	idleSent bool
	shutdown bool
	doneSent bool
	cur      *holding
	waiters  []*waiter
	op       op
	seq      uint64
	acqSent  time.Time
	relReply chan<- error
	relThen  func() // runs when the release in flight is answered
	polling  bool   // the head waiter waits for a retry tick or a release notice
	noticed  bool   // a release notice came while an acquire was in flight
	holdT    timer  // the holding's renewals and local deadline
	retryT   timer

	// busy is the last refusal seen: who holds the key elsewhere. A
	// one-attempt Acquire that cannot ask the backend itself (a waiter is
	// ahead of it) is answered with it, or, while an attempt is in flight,
	// joins observers and gets that attempt's answer.
	busy      busyInfo
	observers []*messages.Acquire
	// maxToken is the highest token this actor has seen for the key: a
	// grant at or below it breaks the store's fencing promise and is
	// refused (defence in depth; the backends guarantee it).
	maxToken uint64

	// The release in flight (op == opReleasing), remembered as unconfirmed
	// if it fails; see unconfirmed.go.
	rel         *pendingRelease
	unconfirmed []*pendingRelease
	unconfDue   bool
	unconfT     timer

	// An Immediate backend (memory) is called right here rather than through
	// the backend actor, saving two message hops per call; its results queue
	// in inbox and are handled before the next message, exactly as if they
	// had come back through the mailbox.
	immediate bool
	inbox     []any
}

func newLeaseActor(cfg *Config, key string, registry, backendPID, hubPID *actor.PID, stopped func()) actor.Actor {
	_, immediate := cfg.Backend.(backend.Immediate)
	return &leaseActor{cfg: cfg, key: key, registry: registry, backend: backendPID, hub: hubPID,
		immediate: immediate, stopped: stopped}
}

func (a *leaseActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Stopping:
		a.onStopping(ctx)
		return
	case *actor.Stopped:
		ctx.Send(a.registry, &messages.LeaseStopped{Key: a.key, PID: a.self})
		a.stopped()
		return
	}
	a.handle(ctx, ctx.Message())
	for {
		for len(a.inbox) > 0 {
			next := a.inbox[0]
			a.inbox[0] = nil
			a.inbox = a.inbox[1:]
			a.handle(ctx, next)
		}
		a.settle(ctx)
		if len(a.inbox) == 0 {
			a.inbox = nil
			return
		}
	}
}

// toBackend sends a backend request (or, for an Immediate backend, makes the
// call and queues its result).
func (a *leaseActor) toBackend(ctx actor.Context, req any) {
	if a.immediate {
		a.inbox = append(a.inbox, perform(a.cfg, context.Background(), true, req))
		return
	}
	ctx.Send(a.backend, req)
}

func (a *leaseActor) handle(ctx actor.Context, msg any) {
	// Whatever the message, a holding past its local deadline is lost first:
	// after a pause of the process, a Release or Renew may be handled before
	// the deadline timer's tick.
	if c := a.cur; c != nil && !time.Now().Before(c.deadline) {
		a.lose(ctx, messages.ReasonExpired, messages.ErrDeadlinePassed)
	}
	switch m := msg.(type) {
	case *actor.Started:
		a.self = ctx.Self()
		a.timers = scheduler.NewTimerScheduler(ctx.ActorSystem().Root)
	case *messages.Acquire:
		a.handled++
		a.onAcquire(m)
	case *messages.CancelWait:
		a.handled++
		a.dropWaiter(m.Ticket, context.Canceled)
	case *messages.Renew:
		a.handled++
		a.onRenew(ctx, m)
	case *messages.Release:
		a.handled++
		a.onRelease(ctx, m)
	case *messages.ReleaseNotice:
		a.handled++
		a.wake()
	case *messages.Shutdown:
		a.handled++
		a.onShutdown(ctx)
	case *messages.AcquireResult:
		a.onAcquireResult(ctx, m)
	case *messages.RenewResult:
		a.onRenewResult(ctx, m)
	case *messages.ReleaseResult:
		a.onReleaseResult(m)
	case *messages.HoldTick:
		if a.cur != nil && a.holdT.fired(m.Gen) {
			a.onHoldTick(ctx)
		}
	case *messages.RetryTick:
		if a.retryT.fired(m.Gen) {
			a.polling = false
		}
	case *messages.ReleaseRetryTick:
		if a.unconfT.fired(m.Gen) {
			a.unconfDue = true
		}
	case *messages.WaitTimeout:
		a.onWaitTimeout(m)
	}
}

// settle runs after every message: it starts the next acquire when the key is
// free here, and reports idleness or the end of a shutdown to the registry.
func (a *leaseActor) settle(ctx actor.Context) {
	a.settleObservers()
	if a.op != opNone || a.cur != nil {
		return
	}
	if a.retryUnconfirmed(ctx) {
		return
	}
	a.startNext(ctx)
	if a.op != opNone {
		return
	}
	switch {
	case a.shutdown:
		if !a.doneSent {
			a.doneSent = true
			ctx.Send(a.registry, &messages.ShutdownDone{Key: a.key})
		}
	case len(a.waiters) == 0 && len(a.unconfirmed) == 0 && (!a.idleSent || a.idleAt != a.handled):
		a.idleSent, a.idleAt = true, a.handled
		ctx.Send(a.registry, &messages.Idle{Key: a.key, Handled: a.handled, From: a.self})
	}
}

// ---- acquiring

func (a *leaseActor) onAcquire(m *messages.Acquire) {
	if a.shutdown {
		m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
		return
	}
	a.unconfDue = true // confirm an earlier release is gone before acquiring again
	if m.Wait == 0 && (a.cur != nil || a.op == opAcquiring || len(a.waiters) > 0) {
		// One attempt, and this Manager already holds the key or a waiter
		// is ahead: no re-entry, no queue jumping. Say who really holds it.
		switch {
		case a.cur != nil:
			m.Reply <- a.heldHere()
		case a.op == opAcquiring || !a.polling:
			a.observers = append(a.observers, m) // the next answer says
		default:
			m.Reply <- a.busy.reply()
		}
		return
	}
	w := &waiter{m: m}
	if m.Wait > 0 {
		w.deadline = time.Now().Add(m.Wait)
		w.timer = a.timers.SendOnce(m.Wait, a.self, &messages.WaitTimeout{Ticket: m.Ticket})
	}
	a.waiters = append(a.waiters, w)
}

// startNext sends an acquire for the first waiter still waiting.
func (a *leaseActor) startNext(ctx actor.Context) {
	for len(a.waiters) > 0 {
		w := a.waiters[0]
		if a.shutdown {
			a.popHead()
			w.m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
			continue
		}
		if err := w.m.Ctx.Err(); err != nil || w.m.Ticket.Abandoned() {
			a.popHead()
			w.m.Reply <- messages.AcquireReply{Err: err}
			continue
		}
		if a.polling {
			return
		}
		if w.attempt == "" {
			w.attempt = a.cfg.newAttempt()
		}
		a.op, a.seq, a.acqSent, a.noticed = opAcquiring, a.seq+1, time.Now(), false
		a.toBackend(ctx, &messages.BackendAcquire{
			Seq: a.seq,
			Req: backend.AcquireRequest{Key: a.key, Owner: a.cfg.Owner, Attempt: w.attempt, TTL: w.m.TTL, Metadata: w.m.Metadata},
			Ctx: w.m.Ctx, ReplyTo: a.self,
		})
		return
	}
}

func (a *leaseActor) onAcquireResult(ctx actor.Context, r *messages.AcquireResult) {
	if a.op != opAcquiring || r.Seq != a.seq {
		return
	}
	a.op = opNone
	w := a.waiters[0]
	m := w.m
	switch {
	case r.Err != nil:
		a.popHead()
		err := acquireError(m, r.Err)
		if a.shutdown || a.cfg.Closing.Load() {
			// Closing: the call was cancelled by Close (whose Shutdown may
			// still be on its way to this actor), or failed meanwhile.
			err = messages.ErrClosed
		}
		a.answerObservers(messages.AcquireReply{Err: err})
		if !errors.Is(r.Err, backend.ErrInvalidRequest) {
			// The grant may have happened with the answer lost: release
			// whatever this attempt got before anyone goes on.
			a.releaseThenReply(ctx, w.attempt, 0, m.TTL, m, err)
			return
		}
		m.Reply <- messages.AcquireReply{Err: err}

	case !r.Grant.Acquired:
		a.busy = busyInfo{holder: r.Grant.Holder, expiresAt: r.Grant.HolderExpiresAt}
		a.maxToken = max(a.maxToken, r.Grant.HolderToken)
		a.answerObservers(a.busy.reply())
		if m.Wait == 0 || (!w.deadline.IsZero() && !time.Now().Before(w.deadline)) {
			a.popHead()
			m.Reply <- a.busy.reply()
			return
		}
		if a.noticed { // released meanwhile: try again at once
			w.attempts = 0
			return
		}
		a.polling = true
		a.retryT.arm(a.timers, pollDelay(w.attempts, a.cfg.notifications.Load(), r.Grant.HolderExpiresIn), a.self, func(g uint64) any { return &messages.RetryTick{Gen: g} })
		w.attempts++

	default:
		a.popHead()
		tok := r.Grant.Token
		fenced := tok <= a.maxToken
		a.maxToken = max(a.maxToken, tok)
		if a.shutdown {
			a.answerObservers(messages.AcquireReply{Err: messages.ErrClosed})
		} else {
			a.answerObservers(messages.AcquireReply{Err: messages.ErrNotAcquired, Holder: a.cfg.Owner, HolderExpiresAt: r.Grant.ExpiresAt})
		}
		switch {
		case a.shutdown:
			a.releaseThenReply(ctx, w.attempt, tok, m.TTL, m, messages.ErrClosed)
		case fenced:
			a.releaseThenReply(ctx, w.attempt, tok, m.TTL, m, fmt.Errorf("%w: acquire %q: the backend granted token %d, not above token %d seen before for this name", messages.ErrTokenNotIncreasing, m.Name, tok, a.maxToken))
		case !localDeadline(a.acqSent, m.TTL).After(time.Now()):
			a.releaseThenReply(ctx, w.attempt, tok, m.TTL, m, fmt.Errorf("leasehold: acquire %q: the grant arrived after its local deadline (TTL %v is too short for this backend's latency)", m.Name, m.TTL))
		case !m.Ticket.Claim():
			// The caller gave up while the grant was on its way.
			a.startRelease(ctx, w.attempt, tok, m.TTL, nil)
		default:
			a.hold(ctx, m, w.attempt, r.Grant)
		}
	}
}

// busyInfo is who held the key at the last refusal.
type busyInfo struct {
	holder    string
	expiresAt time.Time // on the store's clock, for the caller to read
}

func (b busyInfo) reply() messages.AcquireReply {
	return messages.AcquireReply{Err: messages.ErrNotAcquired, Holder: b.holder, HolderExpiresAt: b.expiresAt}
}

// heldHere is the refusal of a one-attempt Acquire while this Manager holds
// the key.
func (a *leaseActor) heldHere() messages.AcquireReply {
	return messages.AcquireReply{Err: messages.ErrNotAcquired, Holder: a.cfg.Owner, HolderExpiresAt: a.cur.h.ExpiresAt()}
}

// settleObservers answers the one-attempt Acquires waiting to learn who holds
// the key once no attempt in flight will tell them; when nobody is ahead of
// them any more, the first makes its own attempt.
func (a *leaseActor) settleObservers() {
	if len(a.observers) == 0 || a.op == opAcquiring || a.shutdown {
		return
	}
	switch {
	case a.cur != nil:
		a.answerObservers(a.heldHere())
	case a.polling:
		a.answerObservers(a.busy.reply())
	case a.op == opNone && len(a.waiters) == 0:
		m := a.observers[0]
		a.observers[0] = nil
		a.observers = a.observers[1:]
		a.waiters = append(a.waiters, &waiter{m: m})
	}
}

// answerObservers answers the one-attempt Acquires that waited for the
// attempt in flight to learn who holds the key.
func (a *leaseActor) answerObservers(reply messages.AcquireReply) {
	for _, m := range a.observers {
		m.Reply <- reply
	}
	a.observers = nil
}

func acquireError(m *messages.Acquire, err error) error {
	if cerr := m.Ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, backend.ErrInvalidRequest) {
		return fmt.Errorf("%w: acquire %q: %w", messages.ErrInvalidOption, m.Name, err)
	}
	return fmt.Errorf("leasehold: acquire %q: %w", m.Name, err)
}

// hold turns a claimed grant into the current holding and hands it over.
func (a *leaseActor) hold(ctx actor.Context, m *messages.Acquire, attempt string, g backend.Grant) {
	h := messages.NewHolding(m.Name, a.key, a.cfg.Owner, attempt, m.Metadata, g.Token, g.ExpiresAt)
	h.TTL, h.AutoRenew, h.RenewEvery = m.TTL, m.AutoRenew, m.RenewEvery
	a.cur = &holding{h: h, ttl: m.TTL, renewEvery: m.RenewEvery, auto: m.AutoRenew, deadline: localDeadline(a.acqSent, m.TTL)}
	h.SetDeadline(a.cur.deadline)
	a.cfg.Held.add(h)
	a.cfg.Metrics.heldDelta(1)
	if a.cur.auto {
		a.cur.nextRenew = time.Now().Add(spread(a.cur.renewEvery))
	}
	a.armHold()
	m.Reply <- messages.AcquireReply{Holding: h}
}

func (a *leaseActor) onWaitTimeout(m *messages.WaitTimeout) {
	i := a.indexOf(m.Ticket)
	if i < 0 || (i == 0 && a.op == opAcquiring) {
		return // gone, or its attempt in flight decides
	}
	w := a.removeAt(i)
	reply := a.busy.reply()
	if a.cur != nil {
		reply = a.heldHere()
	}
	w.m.Reply <- reply
}

// dropWaiter removes a waiter whose caller gave up.
func (a *leaseActor) dropWaiter(t *messages.Ticket, err error) {
	i := a.indexOf(t)
	if i < 0 || (i == 0 && a.op == opAcquiring) {
		return // its attempt in flight will find the ticket abandoned
	}
	a.removeAt(i).m.Reply <- messages.AcquireReply{Err: err}
}

// wake retries the head waiter now: the key was released somewhere.
func (a *leaseActor) wake() {
	switch {
	case a.polling:
		a.retryT.stop()
		a.polling = false
		a.waiters[0].attempts = 0
	case a.op == opAcquiring:
		// The release may have come after the attempt in flight was
		// answered "busy" on the server: retry as soon as it returns.
		a.noticed = true
	}
}

func (a *leaseActor) indexOf(t *messages.Ticket) int {
	for i, w := range a.waiters {
		if w.m.Ticket == t {
			return i
		}
	}
	return -1
}

func (a *leaseActor) popHead() { a.removeAt(0) }

func (a *leaseActor) removeAt(i int) *waiter {
	w := a.waiters[i]
	if w.timer != nil {
		w.timer()
	}
	if i == 0 && a.polling {
		a.retryT.stop()
		a.polling = false
	}
	a.waiters[i] = nil
	a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
	if len(a.waiters) == 0 {
		a.waiters = nil // let a long queue's array go
	}
	return w
}

// ---- renewing

func (a *leaseActor) onRenew(ctx actor.Context, m *messages.Renew) {
	c := a.cur
	if c == nil || c.h.Token != m.Token {
		m.Reply <- messages.ErrStale
		return
	}
	if c.renewing {
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
	a.seq++
	c.renewing, c.renewSeq, c.renewSent, c.renewTTL, c.renewReplies = true, a.seq, time.Now(), ttl, replies
	a.toBackend(ctx, &messages.BackendRenew{
		Seq:      a.seq,
		Req:      backend.RenewRequest{Key: a.key, Owner: a.cfg.Owner, Attempt: c.h.Attempt, Token: c.h.Token, TTL: ttl},
		Deadline: c.deadline,
		MaxDelay: renewBatchWait(c.renewEvery, replies),
		ReplyTo:  a.self,
	})
}

func (a *leaseActor) onRenewResult(ctx actor.Context, r *messages.RenewResult) {
	c := a.cur
	if c == nil || !c.renewing || r.Seq != c.renewSeq {
		return // the holding ended meanwhile
	}
	c.renewing = false
	a.cfg.Metrics.renewed(r.Err == nil)
	replies := c.renewReplies
	c.renewReplies = nil
	switch {
	case r.Err == nil:
		c.h.SetExpiresAt(r.Grant.ExpiresAt)
		c.deadline = localDeadline(c.renewSent, c.renewTTL)
		c.h.SetDeadline(c.deadline)
		if c.auto {
			c.nextRenew = time.Now().Add(spread(renewDelay(c.renewEvery, c.ttl, c.renewTTL)))
		}
		a.armHold()
		sendAll(replies, nil)
	case errors.Is(r.Err, backend.ErrNotHeld):
		err := a.lose(ctx, messages.ReasonRejected, r.Err)
		sendAll(replies, err)
		return
	default:
		a.cfg.Logger.Warn("leasehold: renewal not confirmed; retrying until the local deadline",
			"key", a.key, "token", c.h.Token, "left", time.Until(c.deadline), "err", r.Err)
		sendAll(replies, fmt.Errorf("leasehold: renew %q not confirmed: %w", c.h.Name, r.Err))
		if c.auto {
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
	c, now := a.cur, time.Now()
	if !now.Before(c.deadline) {
		a.lose(ctx, messages.ReasonExpired, messages.ErrDeadlinePassed)
		return
	}
	if !c.nextRenew.IsZero() && !now.Before(c.nextRenew) {
		c.nextRenew = time.Time{}
		if !c.renewing { // else the renewal in flight schedules the next
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
	a.holdT.arm(a.timers, time.Until(at), a.self, func(g uint64) any { return &messages.HoldTick{Gen: g} })
}

// lose ends the current holding as lost, tells the subscribers, and releases
// the key in case the backend still has it (only this owner's token matches).
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
	ctx.Send(a.hub, &messages.Publish{Event: messages.Lost{
		Name: c.h.Name, Owner: c.h.Owner, Token: c.h.Token, Reason: reason, At: time.Now(), Err: err,
	}})
	return err
}

// end ends the current holding with err and forgets it.
func (a *leaseActor) end(err error, lost bool) {
	c := a.cur
	a.cur = nil
	a.holdT.stop()
	c.h.End(err, lost)
	a.cfg.Held.remove(c.h)
	a.cfg.Metrics.heldDelta(-1)
	sendAll(c.renewReplies, err)
	for _, m := range c.queued {
		m.Reply <- err
	}
}

// ---- releasing

func (a *leaseActor) onRelease(ctx actor.Context, m *messages.Release) {
	c := a.cur
	if c == nil || c.h.Token != m.Token {
		m.Reply <- nil // already ended: nothing to do, no backend call
		return
	}
	a.end(fmt.Errorf("%w: lease %q (token %d)", messages.ErrReleased, c.h.Name, c.h.Token), false)
	a.startRelease(ctx, c.h.Attempt, c.h.Token, c.ttl, m.Reply)
}

// releaseThenReply gives back a grant the caller of m cannot have, and only
// once the backend has answered tells the caller err: nothing granted is left
// unowned behind an error.
func (a *leaseActor) releaseThenReply(ctx actor.Context, attempt string, token uint64, ttl time.Duration, m *messages.Acquire, err error) {
	a.startRelease(ctx, attempt, token, ttl, nil)
	a.relThen = func() { m.Reply <- messages.AcquireReply{Err: err} }
}

// startRelease releases the holding (attempt, token) on the backend; token 0
// releases whatever that attempt got. The next acquire waits for its answer;
// if it fails, the release is remembered as unconfirmed (see unconfirmed.go).
// ttl is the holding's: how long the store may keep it if the release is lost.
func (a *leaseActor) startRelease(ctx actor.Context, attempt string, token uint64, ttl time.Duration, reply chan<- error) {
	a.op, a.seq, a.relReply, a.relThen = opReleasing, a.seq+1, reply, nil
	a.rel = &pendingRelease{attempt: attempt, token: token, ttl: ttl}
	a.toBackend(ctx, &messages.BackendRelease{
		Seq:     a.seq,
		Req:     backend.ReleaseRequest{Key: a.key, Owner: a.cfg.Owner, Attempt: attempt, Token: token},
		ReplyTo: a.self,
	})
}

func (a *leaseActor) onReleaseResult(r *messages.ReleaseResult) {
	if a.op != opReleasing || r.Seq != a.seq {
		return
	}
	a.op = opNone
	err := r.Err
	a.settleRelease(a.rel, err)
	a.rel = nil
	if err != nil {
		err = fmt.Errorf("leasehold: release %q: %w", a.key, err)
	}
	if a.relReply != nil {
		a.relReply <- err
		a.relReply = nil
	}
	if then := a.relThen; then != nil {
		a.relThen = nil
		then()
	}
}

// ---- shutting down

func (a *leaseActor) onShutdown(ctx actor.Context) {
	a.shutdown = true
	if a.op == opReleasing && a.rel != nil && a.unconfirmedIndex(a.rel) >= 0 {
		// A retry of an unconfirmed release: Close does not wait for it.
		// It may have been sent after the backend actor cancelled the calls
		// in flight, and then runs under Close's context, which a store that
		// does not answer would hold for the whole release timeout. It
		// failed once already; the store frees the name at its TTL. Its
		// answer, if one comes, is ignored (its seq is stale).
		a.op, a.rel = opNone, nil
		a.seq++
	}
	a.answerObservers(messages.AcquireReply{Err: messages.ErrClosed})
	for i := len(a.waiters) - 1; i >= 0; i-- {
		if i == 0 && a.op == opAcquiring {
			break // its result releases any grant and answers ErrClosed
		}
		a.removeAt(i).m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
	}
	if c := a.cur; c != nil {
		a.end(closedReleased(c.h), false)
		a.startRelease(ctx, c.h.Attempt, c.h.Token, c.ttl, nil)
	}
}

func closedReleased(h *messages.Holding) error {
	return fmt.Errorf("%w: lease %q (token %d) by Manager.Close", messages.ErrReleased, h.Name, h.Token)
}

// onStopping runs when the actor stops: normally idle, with nothing to do.
// After a forced stop or a panic it still answers every waiter and ends the
// holding, so no caller waits forever and no handle claims a key it no longer
// renews.
func (a *leaseActor) onStopping(ctx actor.Context) {
	a.holdT.stop()
	a.retryT.stop()
	a.unconfT.stop()
	a.answerObservers(messages.AcquireReply{Err: messages.ErrClosed})
	for _, w := range a.waiters {
		if w.timer != nil {
			w.timer()
		}
		w.m.Reply <- messages.AcquireReply{Err: messages.ErrClosed}
	}
	a.waiters = nil
	if c := a.cur; c != nil {
		if a.cfg.Closing.Load() {
			// Close's context ended before this actor handled Shutdown:
			// the holding ends as Close ends it, released; its release
			// is not sent, and the store frees the key at its TTL.
			a.end(closedReleased(c.h), false)
		} else {
			// A panic: the holding is lost, and its release sent without
			// waiting for an answer.
			a.end(fmt.Errorf("%w: lease %q (token %d): its actor stopped", messages.ErrLost, c.h.Name, c.h.Token), true)
			a.toBackend(ctx, &messages.BackendRelease{Req: backend.ReleaseRequest{Key: a.key, Owner: a.cfg.Owner, Attempt: c.h.Attempt, Token: c.h.Token}})
		}
	}
	if a.relReply != nil {
		a.relReply <- messages.ErrClosed
		a.relReply = nil
	}
	if then := a.relThen; then != nil {
		a.relThen = nil
		then()
	}
}

// ---- helpers

func sendAll(replies []chan<- error, err error) {
	for _, r := range replies {
		r <- err
	}
}
