package leasehold

import (
	"context"
	"fmt"
	"sync"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/messages"
)

// Work marks work running under the lease until done is called, and returns
// the context to run it under. That context derives from Context (so
// LeaseFrom finds the lease, and a loss ends it at once), and it is ended
// first whenever the holding is ended on purpose: Release and Manager.Close
// end it, wait for done while the lease stays held and renewed, and only
// then tell the store. So the next holder never starts while this one's work
// still runs. Do runs its function as such work; partition's OnAssigned and
// election's OnStartedLeading run as such work too.
//
// Work that must be bounded calls StopRenewing after a grace of its own (as
// partition and election do): the lease then ends at its TTL instead of
// being released under the work. A Release from inside the work, with ctx or
// a context derived from it, does not wait for that work. done may be called
// more than once. On a holding that has ended, is being ended, or whose
// Manager is closing, ctx is already done.
func (l *Lease) Work() (ctx context.Context, done func()) {
	return l.works().start(l)
}

// works is l's workSet, made if need be.
func (l *Lease) works() *workSet {
	if s := l.w.Load(); s != nil {
		return s
	}
	l.w.CompareAndSwap(nil, &workSet{})
	return l.w.Load()
}

// workSet is the work running under one lease, and the ending that waits for
// it. Its mutex is the one writer of both; Release, Close and done are the
// callers.
type workSet struct {
	mu      sync.Mutex
	running map[*work]struct{}
	ending  *ending // set once Release or Close asked the holding to end
}

// work is one piece of work started by Lease.Work.
type work struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// workKey finds the work a context was made for, so that a Release from
// inside it does not wait on itself.
type workKey struct{}

// ending is a holding's end on purpose, waiting for its work: once no work
// but except runs, the release is sent and sent is closed.
type ending struct {
	except  *work
	sending bool // the release is being sent: once per ending
	sent    chan struct{}
	// reply is the engine's answer to the release; nil when no release was
	// sent (the holding had ended already, or its actor was gone).
	reply chan error
}

func (s *workSet) start(l *Lease) (context.Context, func()) {
	w := &work{}
	base := context.WithValue(l.h.Context(), workKey{}, w)
	w.ctx, w.cancel = context.WithCancelCause(base)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ending != nil:
		w.cancel(releasingErr(l, "Release"))
		return w.ctx, func() {}
	case l.m.closed.Load():
		// Checked under s.mu, which Close takes after setting closed: work
		// started now is either seen by Close or never counted.
		w.cancel(releasingErr(l, "Manager.Close"))
		return w.ctx, func() {}
	}
	if s.running == nil {
		s.running = map[*work]struct{}{}
	}
	s.running[w] = struct{}{}
	return w.ctx, func() { s.done(l, w) }
}

// done ends w; the last work to end sends the release an ending waits for.
func (s *workSet) done(l *Lease, w *work) {
	s.mu.Lock()
	if _, ok := s.running[w]; !ok {
		s.mu.Unlock()
		return
	}
	// w's context is left alone: the holding's end releases it, and a caller
	// may still derive from it (partition waits on it for a hand-back).
	delete(s.running, w)
	e := s.releaseDueLocked()
	s.mu.Unlock()
	if e != nil {
		l.sendRelease(e)
	}
}

// end starts the holding's end on purpose, asked by by ("Release" or
// "Manager.Close"): every work's context ends, and the release is sent once
// no work but the caller's own (found in ctx) runs. It returns nil when the
// holding has ended or is ending already.
func (s *workSet) end(l *Lease, ctx context.Context, by string) *ending {
	s.mu.Lock()
	if s.ending != nil || l.h.Err() != nil {
		s.mu.Unlock()
		return nil
	}
	e := &ending{sent: make(chan struct{})}
	if w, ok := ctx.Value(workKey{}).(*work); ok {
		if _, mine := s.running[w]; mine {
			e.except = w
		}
	}
	s.ending = e
	if len(s.running) > 0 {
		cause := releasingErr(l, by)
		for w := range s.running {
			w.cancel(cause)
		}
	}
	due := s.releaseDueLocked()
	s.mu.Unlock()
	if due != nil {
		l.sendRelease(due)
	}
	return e
}

// busy reports whether any work runs.
func (s *workSet) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running) > 0
}

// sending reports whether e's release is being sent.
func (s *workSet) sending(e *ending) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.sending
}

// releaseDueLocked returns the ending whose release is now to be sent: no
// work but its except runs, and nobody has sent it yet.
func (s *workSet) releaseDueLocked() *ending {
	e := s.ending
	if e == nil || e.sending {
		return nil
	}
	n := len(s.running)
	if _, ok := s.running[e.except]; ok {
		n--
	}
	if n > 0 {
		return nil
	}
	e.sending = true
	return e
}

// sendRelease ends the handle as released and asks its lease actor to
// release the holding; the answer comes on e.reply. Called once per ending.
func (l *Lease) sendRelease(e *ending) {
	defer close(e.sent)
	if !l.h.End(messages.Released(l.h.Name, l.h.Token), false) {
		return // lost (or closed) meanwhile: nothing to release
	}
	reply := make(chan error, 1)
	if l.m.engine.Send(l.h.Route, &messages.Release{Key: l.h.Key, Token: l.h.Token, Reply: reply}, false) {
		e.reply = reply
	}
}

// wait waits for e's release to be sent and answered, or for the holding to
// end (lost meanwhile), or for ctx to end.
func (l *Lease) wait(ctx context.Context, e *ending) error {
	select {
	case <-e.sent: // at once when no work ran: the holding's context is not made for it
	default:
		if done, err := l.waitSent(ctx, e); done {
			return err
		}
	}
	if e.reply == nil {
		return nil
	}
	if h, ok := lease.HoldingFrom(ctx); ok && h == l.h {
		// ctx is (or derives from) this lease's own context, which the
		// release has just ended: the engine's answer, bounded by its own
		// release limit, is what is waited for.
		ctx = context.WithoutCancel(ctx)
	}
	select {
	case err := <-e.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitSent waits for e's release to be sent while work runs; done reports
// that wait is to return err without waiting for the answer.
func (l *Lease) waitSent(ctx context.Context, e *ending) (done bool, err error) {
	select {
	case <-e.sent:
	case <-l.h.Context().Done():
		if !l.works().sending(e) {
			return true, nil // lost while the work ran: nothing left to release
		}
		<-e.sent // ended by sendRelease, which is about to close sent
	case <-ctx.Done():
		if !l.works().sending(e) {
			return true, ctx.Err()
		}
		<-e.sent // ctx may derive from the lease's context, which sendRelease ended
	}
	return false, nil
}

// releasingErr is the cause that ends a work's context when the holding is
// ended on purpose, by what ("Release" or "Manager.Close").
func releasingErr(l *Lease, by string) error {
	return fmt.Errorf("%w: lease %q (token %d) is being released by %s", ErrReleased, l.h.Name, l.h.Token, by)
}
