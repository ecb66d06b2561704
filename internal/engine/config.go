package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/clock"
)

// Config is what every actor of one Manager shares. Its exported fields are
// set before Start and read-only after; the engine's own state in it
// (unexported, atomic) is read through methods (seam.go).
type Config struct {
	Owner   string
	Backend backend.Backend
	Logger  *slog.Logger
	// MaxInFlight bounds concurrent backend calls (default 256).
	MaxInFlight int
	// RenewBatchSize and RenewBatchDelay bound how many renewals one round
	// trip carries and how early an automatic renewal may go to join one
	// (renewer.go).
	RenewBatchSize  int
	RenewBatchDelay time.Duration

	// Metrics records what the engine does (nil: nothing).
	Metrics *Metrics

	// Clock is the engine's time (nil: the system's). Tests set a fake one
	// to move time by steps.
	Clock clock.Clock
	// now is Clock's Now as a func, made once at Start: every holding
	// keeps it (a method value made per holding cost an allocation each).
	now func() time.Time

	// closing is set by Engine.Shutdown before anything else: a lease
	// actor stopped before it handled Shutdown (Close's context had ended)
	// ends its holding as released, not lost, and a call Shutdown cancels
	// is no failure of the store's (observe).
	closing atomic.Bool

	// Pickup is the pickup window of a hand-off to this Manager's waiters
	// on a Queue store (0: DefaultPickup); a lease's is at most a quarter
	// of its TTL (Config.pickupWindow, Config.PickupWindow).
	Pickup time.Duration
	// info is the backend's Info, read once at Start: the engine decides
	// from it alone what to use of the backend. queue: the store keeps a
	// waiter queue (Info.Queue); handOffNotices: it also sends hand-off notices
	// (Info.HandOffNotices).
	info                  backend.Info
	queue, handOffNotices bool
	// instance and attempts make attempt identities: unique across
	// processes (instance is random) and cheap (a counter, not a random
	// number per attempt).
	instance string
	attempts atomic.Uint64

	releases releaseBounds // the bounding contexts of releases (callContext)

	// lastFailure is the backend's last failed call, cleared by the next
	// call it answers (for Manager.HealthCheck).
	lastFailure atomic.Pointer[CallFailure]
}

// CallFailure is a backend call that got no answer.
type CallFailure struct {
	Op  string
	At  time.Time
	Err error
}

// LastFailure is the backend's last failed call, unless a later call was
// answered.
func (c *Config) LastFailure() *CallFailure { return c.lastFailure.Load() }

// observe records a backend call that started at start and ended with err.
// A refusal (busy, ErrNotHeld) or a rejected request is an answer; an end of
// the caller's own context (callerCtx) is nobody's fault.
func (c *Config) observe(op string, start time.Time, err error, callerCtx context.Context) {
	c.Metrics.called(op, time.Since(start), err)
	switch {
	case err == nil, errors.Is(err, backend.ErrNotHeld), errors.Is(err, backend.ErrInvalidRequest):
		if c.lastFailure.Load() != nil {
			c.lastFailure.Store(nil)
		}
	case callerCtx != nil && callerCtx.Err() != nil:
	case c.closing.Load():
	default:
		c.lastFailure.Store(&CallFailure{Op: op, At: c.clock().Now(), Err: err})
	}
}

// clock is the engine's Clock.
func (c *Config) clock() clock.Clock {
	if c.Clock == nil {
		return clock.System{}
	}
	return c.Clock
}

// newAttempt returns a new acquire attempt identity ("<instance>.<n>").
func (c *Config) newAttempt() string {
	// Built in one buffer: one allocation, where the concatenation of a
	// formatted number took two.
	var buf [48]byte
	b := append(buf[:0], c.instance...)
	b = append(b, '.')
	return string(strconv.AppendUint(b, c.attempts.Add(1), 36))
}

// newInstance returns 16 random hex digits: with 64 bits, two Managers that
// ever share a store never share an instance.
func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DefaultPickup is the default pickup window: a dead waiter delays the others
// at most this long, once; a queued waiter whose hand-off notice was lost
// gets the key within it.
const DefaultPickup = 2 * time.Second

// pickup is the pickup window of a lease of ttl.
func (c *Config) pickupWindow(ttl time.Duration) time.Duration {
	p := c.Pickup
	if p <= 0 {
		p = DefaultPickup
	}
	return max(min(p, ttl/4), time.Millisecond)
}

// EntryTTL is how long a queue entry outlives the acquire that renewed it: a
// few poll periods (the longest a queued waiter waits between polls is the
// pickup window or pollCapNotified), so that only a dead waiter's lapses.
func EntryTTL(pickup time.Duration) time.Duration {
	return 3 * max(pickup, pollCapNotified)
}

// address is where the store sends this Manager's hand-off notices.
func (c *Config) address() string { return c.instance }

// Defaults of the batching options.
const (
	DefaultRenewBatchSize  = 500
	DefaultRenewBatchDelay = 50 * time.Millisecond
)
