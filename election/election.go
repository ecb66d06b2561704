package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/backoff"
)

// Callbacks are what Run calls as leadership comes and goes. Any may be nil.
// For one Run they are never called concurrently with each other.
type Callbacks struct {
	// OnStartedLeading runs while this process leads. Its ctx ends the
	// moment leadership ends (the lease is lost, or Run's ctx ends), and it
	// must return soon after: Run waits for it before calling anything
	// else. leasehold.LeaseFrom(ctx) returns the leadership lease.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called after OnStartedLeading has returned, when
	// leadership has ended.
	OnStoppedLeading func()
	// OnNewLeader is called for every change of leader that Run observes,
	// its own election included; identity is the leader Manager's Owner.
	OnNewLeader func(identity string)

	// ResignGrace bounds how long resigning waits for OnStartedLeading to
	// return while the lease is kept renewed (0: DefaultResignGrace). The
	// lease is released only once the callback has returned, so the next
	// leader never starts while this one's work runs. A callback still
	// running after the grace costs the lease its renewals: it ends at its
	// TTL instead of being released (Run still waits for the callback).
	ResignGrace time.Duration
}

// DefaultResignGrace is Callbacks.ResignGrace when it is 0.
const DefaultResignGrace = 30 * time.Second

// observeEvery is how long one campaign attempt waits before Run looks again
// at who leads (for OnNewLeader). Waiting itself is the Manager's: a release
// or the leader's expiry wakes the campaign at once.
const observeEvery = 500 * time.Millisecond

// Run campaigns for name on m until ctx ends, waiting as long as it takes.
// While it leads it runs cb.OnStartedLeading; when leadership is lost it
// calls cb.OnStoppedLeading and campaigns again. When ctx ends it resigns:
// it ends the callback's ctx, waits for OnStartedLeading to return (keeping
// the lease renewed for up to cb.ResignGrace), releases the lease, calls
// OnStoppedLeading, and returns nil. It returns an error only for what campaigning again cannot
// fix: a bad name or option (ErrInvalidName, ErrInvalidOption) or a closed
// Manager (ErrClosed). opts are the lease's: Run accepts WithTTL,
// WithRenewEvery and WithMetadata, and refuses with ErrInvalidOption, before
// any backend call, what would break "one leader, kept while it leads" or
// what Run decides itself: WithLimit(n > 1), WithoutAutoRenew and WithWait.
func Run(ctx context.Context, m *leasehold.Manager, name string, cb Callbacks, opts ...leasehold.AcquireOption) error {
	if err := checkOptions(opts); err != nil {
		return err
	}
	r := &runner{m: m, name: name, cb: cb, opts: append(opts[:len(opts):len(opts)], leasehold.WithWait(observeEvery))}
	return r.run(ctx)
}

// checkOptions refuses the acquire options Run cannot honour.
func checkOptions(opts []leasehold.AcquireOption) error {
	s, err := leasehold.SettingsOf(opts...)
	switch {
	case err != nil:
		return fmt.Errorf("election.Run: %w", err)
	case s.Limit > 1:
		return fmt.Errorf("%w: election.Run: WithLimit(%d): an election has one leader", leasehold.ErrInvalidOption, s.Limit)
	case !s.AutoRenew:
		return fmt.Errorf("%w: election.Run: WithoutAutoRenew: a leader's lease is renewed for as long as it leads", leasehold.ErrInvalidOption)
	case s.WaitSet:
		return fmt.Errorf("%w: election.Run: WithWait: Run campaigns until its ctx ends and chooses its own waiting", leasehold.ErrInvalidOption)
	}
	return nil
}

type runner struct {
	m      *leasehold.Manager
	name   string
	cb     Callbacks
	opts   []leasehold.AcquireOption
	leader string // the last leader reported to OnNewLeader
}

func (r *runner) run(ctx context.Context) error {
	pace := newBackoff()
	for {
		if ctx.Err() != nil {
			return nil
		}
		lease, err := r.m.Acquire(ctx, r.name, r.opts...)
		var busy *leasehold.NotAcquiredError
		switch {
		case err == nil:
			pace.reset()
			r.newLeader(r.m.Owner())
			r.lead(ctx, lease)
		case errors.As(err, &busy):
			if busy.Holder != "" {
				r.newLeader(busy.Holder)
			}
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, leasehold.ErrInvalidName), errors.Is(err, leasehold.ErrInvalidOption), errors.Is(err, leasehold.ErrClosed):
			return err
		default: // the backend failed: campaign again after a pause
			if backoff.Sleep(ctx, pace.next()) != nil {
				return nil
			}
		}
	}
}

// lead runs OnStartedLeading until leadership ends, then calls
// OnStoppedLeading. On resigning it releases the lease, but only after the
// callback has returned.
func (r *runner) lead(ctx context.Context, lease *leasehold.Lease) {
	// The callback runs as the lease's Work, so that Manager.Close, too,
	// ends it and waits for it before the lease is released.
	work, workDone := lease.Work()
	leading, stop := context.WithCancel(work)
	defer stop()
	unhook := context.AfterFunc(ctx, stop) // leadership ends the moment ctx does
	defer unhook()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer workDone()
		if r.cb.OnStartedLeading != nil {
			r.cb.OnStartedLeading(leading)
		}
	}()
	<-leading.Done()
	if lease.Err() == nil { // resigning, not lost
		r.resign(ctx, lease, done)
	}
	<-done
	if r.cb.OnStoppedLeading != nil {
		r.cb.OnStoppedLeading()
	}
}

// resign waits for the callback (done) while the Manager keeps the lease
// renewed, for up to the grace, and then releases the lease. A callback that
// outlives the grace has its lease's renewals stopped instead, so that the
// lease ends at its TTL; it is released when the callback returns, if it is
// still held then. The calls run detached from ctx, which has ended.
func (r *runner) resign(ctx context.Context, lease *leasehold.Lease, done <-chan struct{}) {
	grace := r.cb.ResignGrace
	if grace <= 0 {
		grace = DefaultResignGrace
	}
	detached := context.WithoutCancel(ctx)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-lease.Lost():
	case <-timer.C:
		stopCtx, cancel := context.WithTimeout(detached, releaseTimeout)
		_ = lease.StopRenewing(stopCtx) // fails only once the lease has ended
		cancel()
		<-done
	}
	relCtx, cancel := context.WithTimeout(detached, releaseTimeout)
	_ = lease.Release(relCtx) // nil without a call when the lease has ended
	cancel()
}

// releaseTimeout bounds how long resigning waits for the engine's answer to
// a release; the engine goes on retrying after it (see Lease.Release).
const releaseTimeout = 10 * time.Second

func (r *runner) newLeader(id string) {
	if id == r.leader {
		return
	}
	r.leader = id
	if r.cb.OnNewLeader != nil {
		r.cb.OnNewLeader(id)
	}
}

// Leader returns the identity (Owner) of whoever leads name now; ok is false
// when nobody does.
func Leader(ctx context.Context, m *leasehold.Manager, name string) (identity string, ok bool, err error) {
	info, held, err := m.Inspect(ctx, name)
	if err != nil || !held {
		return "", false, err
	}
	return info.Owner, true, nil
}

// Observe follows who leads name without campaigning, until ctx ends; then
// it returns nil. It calls onNewLeader with what it first sees and then for
// every change: the leader's identity (its Manager's Owner), or "" while
// nobody leads. It looks every half second, so a leadership shorter than that
// may go unseen. It returns an error only for what looking again cannot fix:
// a bad name (ErrInvalidName) or a closed Manager (ErrClosed); a failing
// store is asked again after a pause.
func Observe(ctx context.Context, m *leasehold.Manager, name string, onNewLeader func(identity string)) error {
	pace := newBackoff()
	first, last := true, ""
	for {
		id, _, err := Leader(ctx, m, name)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, leasehold.ErrInvalidName), errors.Is(err, leasehold.ErrClosed):
			return err
		case err != nil:
			if backoff.Sleep(ctx, pace.next()) != nil {
				return nil
			}
			continue
		}
		pace.reset()
		if first || id != last {
			first, last = false, id
			if onNewLeader != nil {
				onNewLeader(id)
			}
		}
		if backoff.Sleep(ctx, observeEvery) != nil {
			return nil
		}
	}
}
