package election

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold"
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
}

// observeEvery is how long one campaign attempt waits before Run looks again
// at who leads (for OnNewLeader). Waiting itself is the Manager's: a release
// or the leader's expiry wakes the campaign at once.
const observeEvery = 500 * time.Millisecond

// Run campaigns for name on m until ctx ends, waiting as long as it takes.
// While it leads it runs cb.OnStartedLeading; when leadership is lost it
// calls cb.OnStoppedLeading and campaigns again. When ctx ends it stops
// leading, releases the lease, calls OnStoppedLeading if it was leading, and
// returns nil. It returns an error only for what campaigning again cannot
// fix: a bad name or option (ErrInvalidName, ErrInvalidOption) or a closed
// Manager (ErrClosed). opts are the lease's (WithTTL, WithMetadata, ...);
// Run chooses the waiting itself.
func Run(ctx context.Context, m *leasehold.Manager, name string, cb Callbacks, opts ...leasehold.AcquireOption) error {
	r := &runner{m: m, name: name, cb: cb, opts: append(opts[:len(opts):len(opts)], leasehold.WithWait(observeEvery))}
	return r.run(ctx)
}

type runner struct {
	m      *leasehold.Manager
	name   string
	cb     Callbacks
	opts   []leasehold.AcquireOption
	leader string // the last leader reported to OnNewLeader
}

func (r *runner) run(ctx context.Context) error {
	backoff := newBackoff()
	for {
		if ctx.Err() != nil {
			return nil
		}
		lease, err := r.m.Acquire(ctx, r.name, r.opts...)
		var busy *leasehold.NotAcquiredError
		switch {
		case err == nil:
			backoff.reset()
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
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff.next()):
			}
		}
	}
}

// lead runs OnStartedLeading until leadership ends, then releases the lease
// and calls OnStoppedLeading.
func (r *runner) lead(ctx context.Context, lease *leasehold.Lease) {
	leading, stop := context.WithCancel(lease.Context())
	defer stop()
	unhook := context.AfterFunc(ctx, stop) // leadership ends the moment ctx does
	defer unhook()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r.cb.OnStartedLeading != nil {
			r.cb.OnStartedLeading(leading)
		}
	}()
	<-leading.Done()
	// Release before waiting for the callback: the next leader need not wait
	// for this one's clean-up. The release runs detached from ctx.
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	_ = lease.Release(relCtx)
	cancel()
	<-done
	if r.cb.OnStoppedLeading != nil {
		r.cb.OnStoppedLeading()
	}
}

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
