package engine

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
)

// What the lease actor (package actors) uses of the engine, all in one place:
// the rest of the package is the engine's own.

// Entry is one key's lease actor as the router knows it (see router).
type Entry = entry

// Key is the key the entry routes; StoreKey the store key its actor
// serves (the same, but for a holding under a limit above 1: groups.go).
func (e *entry) Key() string      { return e.key }
func (e *entry) StoreKey() string { return e.storeKey() }

// SetIdle records that the actor is idle, having handled n commands: the
// sweep may retire it once no command has come for a whole sweep period.
func (e *entry) SetIdle(n uint64) {
	e.sleeper = nil
	e.idleAt.Store(n)
}

// Sleep records that the actor, having handled n commands, holds a lease
// with nothing to do: the sweep may put it to sleep, and the actor woken for
// the next command takes s up (TakeSleeper). It is written before idleAt,
// which the sweep reads first.
func (e *entry) Sleep(n uint64, s any) {
	e.sleeper = s
	e.idleAt.Store(n)
}

// TakeSleeper returns what the lease's last actor left when it was put to
// sleep (nil: it did not sleep), and forgets it. Only a new actor calls it,
// while it is spawned (under the router's lock).
func (e *entry) TakeSleeper() any {
	s := e.sleeper
	e.sleeper = nil
	return s
}

// SetHolding records the actor's current holding, for Engine.Holdings.
func (e *entry) SetHolding(h *lease.Holding) { e.holding.Store(h) }

// ClearHolding forgets h, if it is still the current holding.
func (e *entry) ClearHolding(h *lease.Holding) { e.holding.CompareAndSwap(h, nil) }

// Alarms is a heap of holdings' local deadlines that share one timer;
// Engine.AlarmsFor gives a key's.
type Alarms = alarms

// Alarm is one holding's deadline in an Alarms.
type Alarm = alarm

// NewAlarm returns an alarm that sends tick(gen) to en's lease actor when it
// fires (waking it if it sleeps).
func NewAlarm(en *Entry, tick func(gen uint64) any) *Alarm { return newAlarm(en, tick) }

// Arm (re)arms a for at; Disarm takes it back; Fired reports whether a tick
// carrying gen is a's current arming, and disarms it.
func (s *alarms) Arm(a *Alarm, at time.Time) { s.arm(a, at) }

// ArmDeadline arms a for h's local deadline, following it as the renewer
// moves it on: a ticks only once the deadline, as it is then, has come.
func (s *alarms) ArmDeadline(a *Alarm, h *lease.Holding) { s.armFollowing(a, h.Deadline(), h) }
func (s *alarms) Disarm(a *Alarm)                        { s.disarm(a) }
func (s *alarms) Fired(a *Alarm, gen uint64) bool        { return s.fired(a, gen) }

// Renewer owns the due times of the holdings' renewals (see renewer).
type Renewer = renewer

// Renewal is one holding's next renewal, kept in the holding and reused;
// NewRenewal makes one that is not scheduled.
type Renewal = renewal

func NewRenewal() Renewal { return renewal{pos: -1} }

// Schedule, Cancel and SentAt: see schedule, cancel and sentAt.
func (r *renewer) Schedule(n *Renewal, due time.Time, slack time.Duration) { r.schedule(n, due, slack) }
func (r *renewer) Cancel(n *Renewal) (sent time.Time, wasSent bool)        { return r.cancel(n) }
func (r *renewer) SentAt(n *Renewal) time.Time                             { return r.sentAt(n) }

// TickTimer is a re-armable scheduler.SendOnce with generations (see timer).
type TickTimer = timer

// Arm, Fired and Stop: see arm, fired and stop.
func (t *timer) Arm(s *scheduler.TimerScheduler, d time.Duration, pid *actor.PID, tick func(gen uint64) any) {
	t.arm(s, d, pid, tick)
}
func (t *timer) Fired(gen uint64) bool { return t.fired(gen) }
func (t *timer) Stop()                 { t.stop() }

// Closing reports whether Shutdown has begun.
func (e *Engine) Closing() bool { return e.cfg.closing.Load() }

// Queue reports whether the store keeps a waiter queue; HandOffNotices
// whether it also sends hand-off notices.
func (c *Config) Queue() bool          { return c.queue }
func (c *Config) HandOffNotices() bool { return c.handOffNotices }

// Info is the backend's Info, read once at Start.
func (c *Config) Info() backend.Info { return c.info }

// Inline reports whether the backend's Info says Inline: its calls never wait
// on I/O, so lease actors make them themselves.
func (c *Config) Inline() bool { return c.info.Inline }

// ReleasesWatched reports whether the backend's release announcements are
// watched now; HandOffsWatched whether this Manager's hand-off notices are.
func (e *Engine) ReleasesWatched() bool { return e.back.releasesWatched.Load() }
func (e *Engine) HandOffsWatched() bool { return e.back.handOffsWatched.Load() }

// PickupWindow is the pickup window of a lease of ttl.
func (c *Config) PickupWindow(ttl time.Duration) time.Duration { return c.pickupWindow(ttl) }

// NewAttempt returns a new acquire attempt identity.
func (c *Config) NewAttempt() string { return c.newAttempt() }

// Address is where the store sends this Manager's hand-off notices.
func (c *Config) Address() string { return c.address() }

// HeldDelta, Renewed, Lost and HandedOff record what a lease actor did
// (HeldDelta's shared: the holding is under a limit above 1).
func (m *Metrics) HeldDelta(d int64, shared bool) { m.heldDelta(d, shared) }
func (m *Metrics) Renewed(ok bool)                { m.renewed(ok) }
func (m *Metrics) Lost(reason lease.Reason)       { m.lost(reason) }
func (m *Metrics) HandedOff(byNotice bool)        { m.handedOff(byNotice) }

// Perform makes the backend call m right here (an Inline backend's call,
// made by the lease actor itself) and returns its result.
func Perform(cfg *Config, base context.Context, immediate bool, m *protocol.BackendCall) protocol.BackendResult {
	return perform(cfg, base, immediate, m)
}

// Config is the configuration every actor of the Manager shares.
func (e *Engine) Config() *Config { return e.cfg }

// AlarmsFor is the alarm heap of key's holdings.
func (e *Engine) AlarmsFor(key string) *Alarms { return e.alarmsFor(key) }

// Renewer is the Manager's renewer.
func (e *Engine) Renewer() *Renewer { return e.renewer }

// Registry, Backend and Hub are the registry, the backend actor and the
// event hub.
func (e *Engine) Registry() *actor.PID { return e.registry }

// Root sends the ticks of the lease actors' timers.
func (e *Engine) Root() actor.SenderContext { return e.root }
func (e *Engine) Backend() *actor.PID       { return e.backend }
func (e *Engine) Hub() *actor.PID           { return e.hub }

// LeaseStopped counts a lease actor stopped (on its Stopped message).
func (e *Engine) LeaseStopped() { e.leases.Done() }

// Drop forgets en if it is still its key's entry and pid its actor, which is
// stopping on its own: commands from now on go to a new actor. It reports
// false when pid is stopping because its lease was put to sleep: its holding
// lives on in en, and the actor must leave it be.
func (e *Engine) Drop(en *Entry, pid *actor.PID) bool { return e.router.drop(en, pid) }

// Time is the engine's clock: Config.Clock, or the system's when that is nil.
func (c *Config) Time() clock.Clock { return c.clock() }

// Now is the engine clock's Now, one func value for all the holdings.
func (c *Config) Now() func() time.Time { return c.now }

// ArmOn (re)starts the timer on clock c: after d, tick(gen) is sent to pid
// through s.
func (t *timer) ArmOn(c clock.Clock, s actor.SenderContext, d time.Duration, pid *actor.PID, tick func(gen uint64) any) {
	t.armOn(c, s, d, pid, tick)
}

// SendAfter sends msg to pid through s once d has passed on clock c, unless
// the returned stop is called first.
func SendAfter(c clock.Clock, s actor.SenderContext, d time.Duration, pid *actor.PID, msg any) (stop func()) {
	return sendAfter(c, s, d, pid, msg)
}
