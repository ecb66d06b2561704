package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// releaseInFlight is the release the store has yet to answer (state
// releasing).
type releaseInFlight struct {
	seq   uint64
	p     pendingRelease  // remembered as unconfirmed if it fails (unconfirmed.go)
	retry *pendingRelease // the unconfirmed release this sends again, if it is one
	reply chan<- error    // the caller of Lease.Release, if any
	then  func()          // runs when it is answered
}

func (a *leaseActor) onRelease(ctx actor.Context, m *messages.Release) {
	c := a.cur
	if c == nil || c.h.Token != m.Token {
		m.Reply <- nil // already ended: nothing to do, no backend call
		return
	}
	// Lease.Release ended the handle before it sent this.
	err := c.h.Err()
	if err == nil {
		err = messages.Released(c.h.Name, c.h.Token)
	}
	a.end(err, false)
	a.startRelease(ctx, c.h.Attempt, c.h.Token, c.ttl, m.Reply)
}

// releaseThenReply gives back a grant the caller of m cannot have, and only
// once the backend has answered tells the caller err: nothing granted is left
// unowned behind an error.
func (a *leaseActor) releaseThenReply(ctx actor.Context, attempt string, token uint64, ttl time.Duration, m *messages.Acquire, err error) {
	a.startRelease(ctx, attempt, token, ttl, nil)
	a.rel.then = func() { m.Reply <- messages.AcquireReply{Err: err} }
}

// startRelease releases the holding (attempt, token) on the backend; token 0
// releases whatever that attempt got. The next acquire waits for its answer;
// if it fails, the release is remembered as unconfirmed (see unconfirmed.go).
// ttl is the holding's: how long the store may keep it if the release is lost.
func (a *leaseActor) startRelease(ctx actor.Context, attempt string, token uint64, ttl time.Duration, reply chan<- error) {
	a.sendRelease(ctx, &releaseInFlight{p: pendingRelease{attempt: attempt, token: token, ttl: ttl}, reply: reply})
}

// sendRelease sends the release rel: from idle or polling to releasing, from
// closing to closingReleasing.
func (a *leaseActor) sendRelease(ctx actor.Context, rel *releaseInFlight) {
	if a.state == closing {
		a.state = closingReleasing
	} else {
		a.state = releasing
	}
	a.call(ctx, protocol.BackendCall{Call: backend.Call{Op: backend.OpRelease, Release: backend.ReleaseRequest{
		Key: a.key, Owner: a.cfg.Owner, Attempt: rel.p.attempt, Token: rel.p.token,
	}}})
	rel.seq = a.seq
	a.rel = rel
}

func (a *leaseActor) onReleaseResult(r *protocol.BackendResult) {
	if a.rel == nil || r.Seq != a.rel.seq {
		return
	}
	switch a.state {
	case releasing:
		a.state = idle
	case closingReleasing:
		a.state = closing
	default:
		return
	}
	rel := a.rel
	a.rel = nil
	err := r.Err
	a.settleRelease(rel, err)
	if err != nil {
		err = fmt.Errorf("leasehold: release %q: %w", a.key, err)
	}
	if rel.reply != nil {
		rel.reply <- err
	}
	if rel.then != nil {
		rel.then()
	}
}
