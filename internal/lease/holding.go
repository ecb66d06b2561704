package lease

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Holding is the one piece of state shared outside the message flow: the lease
// actor writes it, the public Lease handle reads it. It describes one holding
// of one key, from grant to release or loss.
type Holding struct {
	Name string
	Key  string
	// Route is the key its lease actor is routed by: Key, or for a holding
	// under a limit above 1 a route key of its own (Limit says which).
	Route    string
	Owner    string
	Attempt  string // the acquire attempt that made it: with Token, its name in the store
	Token    uint64
	Metadata string
	Limit    int32 // 1: exclusive

	// AutoRenew: it renews by itself (fixed at the grant).
	AutoRenew bool
	isLost    bool // under mu, with the fields below (here to share Limit's word)

	mu sync.Mutex
	// sig is made on first use: many holdings are never asked for their
	// context or Lost channel, and a holding is kept for every lease held.
	sig       *signals
	expiresAt time.Time
	deadline  time.Time // local, monotonic: past it the holding counts as lost
	confirmed time.Time // local: when the last acquire or renewal was confirmed
	// The TTL that confirmation gave, and the period to the next automatic
	// renewal after it (it stretches with a Renew's TTL), for
	// Manager.HealthCheck.
	ttl, every time.Duration
	err        error
	handle     any
	// now is the engine's clock, which set deadline: the deadline check
	// reads it too, so that a fake clock in tests moves both.
	now func() time.Time
}

// signals are a holding's context and Lost channel.
type signals struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}
}

// signalsLocked returns h.sig, made if need be.
func (h *Holding) signalsLocked() *signals {
	if h.sig == nil {
		h.sig = &signals{}
	}
	return h.sig
}

// NewHolding starts a holding that lasts until End; now is the clock its
// local deadline is set on (nil: the system's).
func NewHolding(name, key, owner, attempt, metadata string, token uint64, expiresAt time.Time, now func() time.Time) *Holding {
	if now == nil {
		now = time.Now
	}
	return &Holding{Name: name, Key: key, Route: key, Limit: 1, Owner: owner, Attempt: attempt, Token: token, Metadata: metadata, expiresAt: expiresAt, now: now}
}

// Context is done when the holding ends; its cause is the error of Err.
// HoldingFrom finds the holding again from it or any context derived from it.
func (h *Holding) Context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkDeadlineLocked()
	sig := h.signalsLocked()
	if sig.ctx == nil {
		sig.ctx, sig.cancel = context.WithCancelCause(context.WithValue(context.Background(), holdingKey{}, h))
		if h.err != nil {
			sig.cancel(h.err)
		}
	}
	return sig.ctx
}

type holdingKey struct{}

// HoldingFrom returns the holding whose Context ctx is or derives from.
func HoldingFrom(ctx context.Context) (*Holding, bool) {
	h, ok := ctx.Value(holdingKey{}).(*Holding)
	return h, ok
}

// SetHandle records the public handle of the holding (package leasehold's
// *Lease), for HoldingFrom's callers to return.
func (h *Holding) SetHandle(v any) {
	h.mu.Lock()
	h.handle = v
	h.mu.Unlock()
}

// Handle is what SetHandle recorded.
func (h *Holding) Handle() any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.handle
}

// Lost is closed when the holding is lost (never on release).
func (h *Holding) Lost() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkDeadlineLocked()
	sig := h.signalsLocked()
	if sig.lost == nil {
		sig.lost = make(chan struct{})
		if h.isLost {
			close(sig.lost)
		}
	}
	return sig.lost
}

// ExpiresAt is the backend's expiry of the last confirmed acquire or renewal.
func (h *Holding) ExpiresAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.expiresAt
}

// SetExpiresAt records a confirmed renewal.
func (h *Holding) SetExpiresAt(t time.Time) {
	h.mu.Lock()
	h.expiresAt = t
	h.mu.Unlock()
}

// Err is nil while held, then why the holding ended.
func (h *Holding) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkDeadlineLocked()
	return h.err
}

// Deadline is the local deadline: from it on, Err reports the holding lost
// (zero until the lease actor sets it).
func (h *Holding) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// SetDeadline lowers or raises the local deadline without a confirmation
// (a renewal that would shorten the lease is on its way).
func (h *Holding) SetDeadline(t time.Time) {
	h.mu.Lock()
	h.deadline = t
	h.mu.Unlock()
}

// Confirm records a confirmed acquire or renewal, confirmed at now (local
// clock): its local deadline, the TTL it gave and the period to the next
// automatic renewal.
func (h *Holding) Confirm(deadline, now time.Time, ttl, every time.Duration) {
	h.mu.Lock()
	h.deadline, h.confirmed, h.ttl, h.every = deadline, now, ttl, every
	h.mu.Unlock()
}

// Renewed records a confirmed renewal, unless the holding has ended or its
// local deadline has passed (it is lost then, and Renewed reports false): its
// new local deadline, the backend's expiry, the TTL it gave and the period to
// the next automatic renewal. The check and the write are one step, so that
// no reader sees a holding lost and then held again.
func (h *Holding) Renewed(deadline, expiresAt time.Time, ttl, every time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkDeadlineLocked()
	if h.err != nil {
		return false
	}
	h.deadline, h.expiresAt, h.confirmed, h.ttl, h.every = deadline, expiresAt, h.now(), ttl, every
	return true
}

// Confirmed is when the last acquire or renewal was confirmed (local clock),
// the TTL it gave, and the period to the next automatic renewal after it.
func (h *Holding) Confirmed() (at time.Time, ttl, every time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.confirmed, h.ttl, h.every
}

// checkDeadlineLocked ends the holding as lost when its local deadline has
// passed. The lease actor does so too, at its deadline timer; but after a
// pause of the whole process (SIGSTOP, a VM stall) the holder's own goroutine
// may run before that timer's message is handled, and must not be told it
// still holds a lease whose TTL has run out.
func (h *Holding) checkDeadlineLocked() {
	if h.err == nil && !h.deadline.IsZero() && !h.now().Before(h.deadline) {
		h.endLocked(fmt.Errorf("%w: lease %q (token %d): %w", ErrLost, h.Name, h.Token, ErrDeadlinePassed), true)
	}
}

// End ends the holding with err (wrapping ErrLost or ErrReleased). Only the
// first call counts; it reports whether it was the first.
func (h *Holding) End(err error, lost bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkDeadlineLocked() // a holding past its deadline was lost, not released
	return h.endLocked(err, lost)
}

func (h *Holding) endLocked(err error, lost bool) bool {
	if h.err != nil {
		return false
	}
	h.err, h.isLost = err, lost
	// Cancel first: whoever sees Lost closed also sees the context's cause.
	if sig := h.sig; sig != nil {
		if sig.cancel != nil {
			sig.cancel(err)
		}
		if lost && sig.lost != nil {
			close(sig.lost)
		}
	}
	return true
}
