package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/internal/engine"
	"github.com/leasehold/leasehold/internal/protocol"
)

// pendingRelease is one release of one holding: the one in flight, or one
// whose answer never came (an unconfirmed release).
//
// A release that fails may or may not have reached the store. If it did not,
// the holding lives on there until its TTL ends: nobody else can take the key
// meanwhile, and this Manager's next Acquire of the key is refused by its own
// old holding (a new attempt never refreshes it). So the lease actor keeps the
// release and sends it again: before the next acquire of the key, and on a
// backoff timer, until the store confirms it or the holding's TTL has surely
// run out. Safety never depends on it (tokens only grow, and a new attempt is
// never given the old holding); it frees the key sooner and leaves nothing
// owned by nobody.
type pendingRelease struct {
	attempt string
	token   uint64        // 0: whatever attempt got (an acquire whose answer was lost)
	ttl     time.Duration // the holding's TTL
	until   time.Time     // local: past it the store has expired the holding
	tries   int
}

// settleRelease records the outcome of the release rel, which was in flight.
func (a *leaseActor) settleRelease(rel *releaseInFlight, err error) {
	p, i := rel.retry, -1
	if p != nil {
		i = a.unconfirmedIndex(p)
	}
	if err == nil || a.state == closing {
		// Confirmed; or Close is under way, and what it could not
		// release is left to expire (see Manager.Close).
		if i >= 0 {
			a.dropUnconfirmed(i)
		}
		return
	}
	if p == nil {
		// The store applied nothing it could have applied later than now,
		// so the holding ends at most a TTL from now.
		p = new(pendingRelease)
		*p = rel.p
		p.until = a.cfg.Time().Now().Add(p.ttl)
		a.unconfirmed = append(a.unconfirmed, p)
	} else if i < 0 {
		return // forgotten meanwhile (its TTL has passed)
	}
	p.tries++
	a.cfg.Logger.Warn("leasehold: release not confirmed; retrying until the lease's TTL has passed",
		"key", a.key, "token", p.token, "tries", p.tries, "err", err)
	a.armReleaseRetry(p)
}

// retryUnconfirmed sends the oldest unconfirmed release again when one is due
// (state idle, polling or closing), and reports whether it did. Releases
// whose TTL has passed are forgotten, and so, once Close has begun (state
// closing), are those sent before.
func (a *leaseActor) retryUnconfirmed(ctx actor.Context) bool {
	now := a.cfg.Time().Now()
	for i := len(a.unconfirmed) - 1; i >= 0; i-- {
		// Close sends no retries: what failed once is left to the store's
		// TTL. A release never sent yet (a waiter leaving the store's
		// queue) still goes, once.
		if p := a.unconfirmed[i]; (a.state == closing && p.tries > 0) || !now.Before(p.until) {
			a.dropUnconfirmed(i)
		}
	}
	if len(a.unconfirmed) == 0 || (!a.unconfDue && a.state != closing) {
		return false
	}
	a.unconfDue = false
	if a.state == polling {
		// The head waiter is likely refused by this very holding: it
		// retries as soon as the release is answered.
		a.retryT.Stop()
	}
	p := a.unconfirmed[0]
	a.sendRelease(ctx, &releaseInFlight{p: *p, retry: p})
	return true
}

// armReleaseRetry schedules the next try of p: backing off, and never later
// than its TTL's end (when it is forgotten, and the actor may go idle).
func (a *leaseActor) armReleaseRetry(p *pendingRelease) {
	d := min(engine.ReleaseRetryDelay(p.tries), max(p.until.Sub(a.cfg.Time().Now()), 0))
	a.unconfT.ArmOn(a.cfg.Time(), a.e.Root(), d, a.self, func(g uint64) any { return &protocol.ReleaseRetryTick{Gen: g} })
}

func (a *leaseActor) unconfirmedIndex(p *pendingRelease) int {
	for i, q := range a.unconfirmed {
		if q == p {
			return i
		}
	}
	return -1
}

func (a *leaseActor) dropUnconfirmed(i int) {
	a.unconfirmed = append(a.unconfirmed[:i], a.unconfirmed[i+1:]...)
	if len(a.unconfirmed) == 0 {
		a.unconfirmed = nil
		a.unconfT.Stop()
	}
}
