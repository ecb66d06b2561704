package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/clock/clocktest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
	"github.com/leasehold/leasehold/messages"
)

// TestLeaseTransitions drives one lease actor through (state, event) →
// (state, backend calls, replies) rows, on a fake clock and a scripted
// backend whose every call waits for the row that answers it. Each scenario
// is a path through the states; each row checks the state it starts from,
// the calls its event makes (in order), the replies it gives, and the state
// it ends in. closing is passed through within one message (lease_state.go),
// so it shows only as the way to closed.
func TestLeaseTransitions(t *testing.T) {
	const ttl = 10 * time.Second
	scenarios := []struct {
		name  string
		queue bool // the store keeps a waiter queue
		rows  []row
	}{
		{name: "acquire, renew, release", rows: []row{
			{from: idle, event: acquire("a", 0), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: renew(5), replies: renewReplied(5, messages.ErrStale), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, granted(5), nil), replies: acquired("a", 5), to: held},
			{from: held, event: acquire("b", 0), replies: refused("b", "me"), to: held},
			{from: held, event: renew(4), replies: renewReplied(4, messages.ErrStale), to: held},
			{from: held, event: renew(5), calls: ops(backend.OpRenew), to: renewing},
			{from: renewing, event: renew(5), to: renewing}, // queued behind the one in flight
			{from: renewing, event: answer(backend.OpRenew, granted(5), nil), calls: ops(backend.OpRenew), to: renewing},
			{from: renewing, event: answer(backend.OpRenew, granted(5), nil), replies: renewReplied(5, nil), to: held},
			{from: held, event: release(5), calls: ops(backend.OpRelease), to: releasing},
			{from: releasing, event: renew(5), replies: renewReplied(5, messages.ErrStale), to: releasing},
			{from: releasing, event: answer(backend.OpRelease, backend.Grant{}, nil), replies: released(5, nil), to: idle},
			{from: idle, event: release(5), replies: released(5, nil), to: idle},
		}},
		{name: "refused, polling, woken, lost at the deadline, release retried", rows: []row{
			{from: idle, event: acquire("a", time.Minute), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, busy("other"), nil), to: polling},
			{from: polling, event: acquire("b", 0), replies: refused("b", "other"), to: polling},
			{from: polling, event: advance(time.Second), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: notice(), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, busy("other"), nil), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, busy("other"), nil), to: polling},
			{from: polling, event: notice(), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, granted(7), nil), replies: acquired("a", 7), to: held},
			{from: held, event: advance(ttl), calls: ops(backend.OpRelease), to: releasing},
			// Unconfirmed: sent again at once (the Acquire asked for it), then on
			// the backoff timer.
			{from: releasing, event: answer(backend.OpRelease, backend.Grant{}, errors.New("store down")), calls: ops(backend.OpRelease), to: releasing},
			{from: releasing, event: answer(backend.OpRelease, backend.Grant{}, errors.New("store down")), to: idle},
			{from: idle, event: advance(time.Second), calls: ops(backend.OpRelease), to: releasing},
			{from: releasing, event: answer(backend.OpRelease, backend.Grant{}, nil), to: idle},
		}},
		{name: "Shutdown during an acquire that is granted", rows: []row{
			{from: idle, event: acquire("a", time.Minute), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: acquire("b", time.Minute), to: acquiring},
			{from: acquiring, event: shutdown(), replies: acquireFailed("b", messages.ErrClosed), to: closingAcquiring},
			{from: closingAcquiring, event: acquire("c", 0), replies: acquireFailed("c", messages.ErrClosed), to: closingAcquiring},
			{from: closingAcquiring, event: answer(backend.OpAcquire, granted(9), nil), calls: ops(backend.OpRelease), to: closingReleasing},
			{from: closingReleasing, event: renew(9), replies: renewReplied(9, messages.ErrStale), to: closingReleasing},
			{from: closingReleasing, event: answer(backend.OpRelease, backend.Grant{}, nil), replies: acquireFailed("a", messages.ErrClosed), to: closed},
			{from: closed, event: acquire("d", time.Minute), replies: acquireFailed("d", messages.ErrClosed), to: closed},
			{from: closed, event: renew(9), replies: renewReplied(9, messages.ErrStale), to: closed},
			{from: closed, event: release(9), replies: released(9, nil), to: closed},
			{from: closed, event: shutdown(), to: closed},
		}},
		{name: "Shutdown during an acquire that is refused", rows: []row{
			{from: idle, event: acquire("a", time.Minute), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: shutdown(), to: closingAcquiring},
			{from: closingAcquiring, event: answer(backend.OpAcquire, busy("other"), nil), replies: acquireFailed("a", messages.ErrClosed), to: closed},
		}},
		{name: "Shutdown while held and while renewing", rows: []row{
			{from: idle, event: acquire("a", 0), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, granted(3), nil), replies: acquired("a", 3), to: held},
			{from: held, event: renew(3), calls: ops(backend.OpRenew), to: renewing},
			{from: renewing, event: shutdown(), calls: ops(backend.OpRelease), replies: renewReplied(3, messages.ErrReleased), to: closingReleasing},
			{from: closingReleasing, event: answer(backend.OpRelease, backend.Grant{}, nil), to: closed},
			{from: closed, event: answer(backend.OpRenew, granted(3), nil), to: closed}, // the renewal's answer is stale
		}},
		{name: "Shutdown while held, with a waiter", rows: []row{
			{from: idle, event: acquire("a", 0), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, granted(4), nil), replies: acquired("a", 4), to: held},
			{from: held, event: acquire("b", time.Minute), to: held}, // waits behind the holding
			{from: held, event: shutdown(), calls: ops(backend.OpRelease), replies: acquireFailed("b", messages.ErrClosed), to: closingReleasing},
			{from: closingReleasing, event: answer(backend.OpRelease, backend.Grant{}, errors.New("store down")), to: closed}, // left to the TTL
		}},
		{name: "Shutdown while polling", rows: []row{
			{from: idle, event: acquire("a", time.Minute), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, busy("other"), nil), to: polling},
			{from: polling, event: shutdown(), replies: acquireFailed("a", messages.ErrClosed), to: closed},
			{from: closed, event: advance(time.Minute), to: closed}, // no poll
		}},
		{name: "Shutdown while idle, and during a caller's release", rows: []row{
			{from: idle, event: acquire("a", 0), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, granted(2), nil), replies: acquired("a", 2), to: held},
			{from: held, event: release(2), calls: ops(backend.OpRelease), to: releasing},
			{from: releasing, event: shutdown(), to: closingReleasing},
			{from: closingReleasing, event: answer(backend.OpRelease, backend.Grant{}, nil), replies: released(2, nil), to: closed},
		}},
		{name: "Shutdown while idle", rows: []row{
			{from: idle, event: release(1), replies: released(1, nil), to: idle},
			{from: idle, event: shutdown(), to: closed},
		}},
		{name: "a waiter that gives up while its acquire is in flight leaves the store's queue when it is answered", queue: true, rows: []row{
			{from: idle, event: acquire("a", time.Minute), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: giveUp("a"), to: acquiring}, // its attempt in flight decides
			{from: acquiring, event: answer(backend.OpAcquire, queuedBehind("other"), nil), calls: ops(backend.OpRelease), replies: acquireFailed("a", context.Canceled), to: releasing},
			{from: releasing, event: answer(backend.OpRelease, backend.Grant{}, nil), to: idle},
			{from: idle, event: advance(time.Minute), to: idle}, // no poll
		}},
		{name: "a refusal under another limit answers at once and leaves the store's queue", queue: true, rows: []row{
			{from: idle, event: acquire("a", 10*time.Minute), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, queuedBehind("other"), nil), to: polling},
			{from: polling, event: advance(5 * time.Second), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, heldUnder(2), nil), calls: ops(backend.OpRelease), replies: acquireFailed("a", messages.ErrLimitMismatch), to: releasing},
			{from: releasing, event: answer(backend.OpRelease, backend.Grant{}, nil), to: idle},
			{from: idle, event: advance(time.Minute), to: idle}, // no poll
		}},
		{name: "a limit the store cannot grant is refused before any call", rows: []row{
			{from: idle, event: acquireLimit("a", time.Minute, 2), replies: acquireFailed("a", messages.ErrInvalidOption), to: idle},
			{from: idle, event: acquire("b", 0), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, busy("other"), nil), replies: refused("b", "other"), to: idle},
		}},
		{name: "wait timeouts", rows: []row{
			{from: idle, event: acquire("a", 2*time.Second), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: acquire("b", time.Second), to: acquiring},
			{from: acquiring, event: advance(time.Second), replies: refused("b", ""), to: acquiring},
			{from: acquiring, event: advance(2 * time.Second), to: acquiring}, // the head's answer decides
			{from: acquiring, event: answer(backend.OpAcquire, busy("other"), nil), replies: refused("a", "other"), to: idle},
			{from: idle, event: acquire("c", time.Minute), calls: ops(backend.OpAcquire), to: acquiring},
			{from: acquiring, event: answer(backend.OpAcquire, busy("other"), nil), to: polling},
			{from: polling, event: acquire("d", time.Second), to: polling},
			{from: polling, event: advance(time.Second), calls: ops(backend.OpAcquire), replies: refused("d", "other"), to: acquiring},
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			r := newLeaseRig(t, sc.queue)
			for i, rw := range sc.rows {
				if err := r.run(rw); err != nil {
					t.Fatalf("row %d (%v, %s): %v", i, rw.from, rw.event.name, err)
				}
			}
			r.stop()
			if n := len(r.b.calls); n > 0 {
				t.Fatalf("%d backend calls no row expected (the first: %v)", n, (<-r.b.calls).op)
			}
		})
	}
}

// row is one transition: from the state from, event makes the backend calls
// calls (each left in flight for a later row to answer), gives the replies
// replies checks, and leaves the actor in state to.
type row struct {
	from    leaseState
	event   event
	calls   []backend.Op
	replies func(r *leaseRig) error
	to      leaseState
}

type event struct {
	name string
	do   func(r *leaseRig) error
}

func ops(o ...backend.Op) []backend.Op { return o }

// acquire sends an Acquire for the caller named who (one attempt when wait
// is 0), without automatic renewals.
func acquire(who string, wait time.Duration) event {
	return event{"Acquire " + who, func(r *leaseRig) error {
		reply := make(chan messages.AcquireReply, 1)
		r.acquires[who] = reply
		r.tickets[who] = new(lease.Ticket)
		r.send(&messages.Acquire{Name: r.key, Key: r.key, TTL: 10 * time.Second, Wait: wait,
			Ctx: context.Background(), Ticket: r.tickets[who], Reply: reply})
		return nil
	}}
}

// acquireLimit is acquire with Limit n, sent (as the exclusive lease's
// would be) to the rig's key.
func acquireLimit(who string, wait time.Duration, n int) event {
	return event{fmt.Sprintf("Acquire %s with limit %d", who, n), func(r *leaseRig) error {
		reply := make(chan messages.AcquireReply, 1)
		r.acquires[who] = reply
		r.tickets[who] = new(lease.Ticket)
		r.send(&messages.Acquire{Name: r.key, Key: r.key, TTL: 10 * time.Second, Wait: wait, Limit: n,
			Ctx: context.Background(), Ticket: r.tickets[who], Reply: reply})
		return nil
	}}
}

// giveUp does what Acquire does when its caller's context ends: it abandons
// the ticket and sends CancelWait.
func giveUp(who string) event {
	return event{"give up " + who, func(r *leaseRig) error {
		t := r.tickets[who]
		if !t.Abandon() {
			return fmt.Errorf("%s's ticket was claimed already", who)
		}
		r.send(&messages.CancelWait{Key: r.key, Ticket: t})
		return nil
	}}
}

func renew(token uint64) event {
	return event{fmt.Sprint("Renew ", token), func(r *leaseRig) error {
		reply := make(chan error, 1)
		r.renews[token] = append(r.renews[token], reply)
		r.send(&messages.Renew{Key: r.key, Token: token, Reply: reply})
		return nil
	}}
}

func release(token uint64) event {
	return event{fmt.Sprint("Release ", token), func(r *leaseRig) error {
		reply := make(chan error, 1)
		r.releases[token] = reply
		r.send(&messages.Release{Key: r.key, Token: token, Reply: reply})
		return nil
	}}
}

func notice() event {
	return event{"ReleaseNotice", func(r *leaseRig) error {
		r.send(&protocol.ReleaseNotice{Key: r.key})
		return nil
	}}
}

// shutdown sends Shutdown to the lease actor itself, as the registry does
// (the backend actor is not told, so calls in flight are not cancelled).
func shutdown() event {
	return event{"Shutdown", func(r *leaseRig) error {
		r.send(&messages.Shutdown{Ctx: context.Background(), Reply: make(chan struct{})})
		return nil
	}}
}

// advance moves the fake clock on by d.
func advance(d time.Duration) event {
	return event{fmt.Sprint("clock +", d), func(r *leaseRig) error {
		r.clock.Advance(d)
		return nil
	}}
}

// answer answers the oldest call of op in flight.
func answer(op backend.Op, g backend.Grant, err error) event {
	return event{fmt.Sprintf("answer the %v: acquired %v, err %v", op, g.Acquired, err), func(r *leaseRig) error {
		for i, c := range r.inFlight {
			if c.op == op {
				r.inFlight = append(r.inFlight[:i], r.inFlight[i+1:]...)
				c.answer <- scriptAnswer{g, err}
				return nil
			}
		}
		return fmt.Errorf("no %v in flight to answer", op)
	}}
}

func granted(token uint64) backend.Grant {
	return backend.Grant{Acquired: true, Token: token, ExpiresAt: time.Now().Add(10 * time.Second)}
}

func busy(holder string) backend.Grant { return backend.Grant{Holder: holder, HolderToken: 1} }

// queuedBehind is a refusal that queued the attempt on the store.
func queuedBehind(holder string) backend.Grant {
	return backend.Grant{Holder: holder, HolderToken: 1, HolderExpiresIn: time.Minute, Queued: true}
}

// heldUnder is a refusal because the key's live holdings have limit n.
func heldUnder(n int) backend.Grant {
	return backend.Grant{Holder: "other", HolderToken: 1, HolderExpiresIn: time.Minute, HeldLimit: n}
}

func busyFor(holder string, left time.Duration) backend.Grant {
	return backend.Grant{Holder: holder, HolderToken: 1, HolderExpiresIn: left}
}

// acquired checks that who got a holding of token.
func acquired(who string, token uint64) func(*leaseRig) error {
	return func(r *leaseRig) error {
		rep, err := r.acquireReply(who)
		if err != nil {
			return err
		}
		if rep.Err != nil || rep.Holding == nil || rep.Holding.Token != token {
			return fmt.Errorf("acquire %s: got %+v, want a holding of token %d", who, rep, token)
		}
		return nil
	}
}

// refused checks that who was told ErrNotAcquired, holder holding the key.
func refused(who, holder string) func(*leaseRig) error {
	return func(r *leaseRig) error {
		rep, err := r.acquireReply(who)
		if err != nil {
			return err
		}
		if !errors.Is(rep.Err, messages.ErrNotAcquired) || rep.Holder != holder {
			return fmt.Errorf("acquire %s: got %+v, want ErrNotAcquired held by %q", who, rep, holder)
		}
		return nil
	}
}

func acquireFailed(who string, want error) func(*leaseRig) error {
	return func(r *leaseRig) error {
		rep, err := r.acquireReply(who)
		if err != nil {
			return err
		}
		if !errors.Is(rep.Err, want) {
			return fmt.Errorf("acquire %s: got %+v, want %v", who, rep, want)
		}
		return nil
	}
}

// renewReplied checks the replies to every Renew of token sent so far.
func renewReplied(token uint64, want error) func(*leaseRig) error {
	return func(r *leaseRig) error {
		for _, c := range r.renews[token] {
			select {
			case err := <-c:
				if !errors.Is(err, want) || (want == nil && err != nil) {
					return fmt.Errorf("renew %d: got %v, want %v", token, err, want)
				}
			default:
				return fmt.Errorf("renew %d: no reply", token)
			}
		}
		delete(r.renews, token)
		return nil
	}
}

func released(token uint64, want error) func(*leaseRig) error {
	return func(r *leaseRig) error {
		select {
		case err := <-r.releases[token]:
			if !errors.Is(err, want) || (want == nil && err != nil) {
				return fmt.Errorf("release %d: got %v, want %v", token, err, want)
			}
			return nil
		default:
			return fmt.Errorf("release %d: no reply", token)
		}
	}
}

// leaseRig is an engine on a fake clock and a scripted backend, and the
// replies its callers have had.
type leaseRig struct {
	t        *testing.T
	key      string
	clock    *clocktest.Fake
	b        *scriptedBackend
	sys      *actor.ActorSystem
	e        *Engine
	inFlight []*scriptCall
	acquires map[string]chan messages.AcquireReply
	tickets  map[string]*lease.Ticket
	renews   map[uint64][]chan error
	releases map[uint64]chan error
	stopped  bool
}

func newLeaseRig(t *testing.T, queue bool) *leaseRig {
	r := &leaseRig{t: t, key: "k", clock: clocktest.New(), b: &scriptedBackend{calls: make(chan *scriptCall, 64)},
		acquires: map[string]chan messages.AcquireReply{}, tickets: map[string]*lease.Ticket{}, renews: map[uint64][]chan error{}, releases: map[uint64]chan error{}}
	r.b.queue = queue
	quiet := slog.New(slog.DiscardHandler)
	r.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	e, err := Start(r.sys.Root, Config{Owner: "me", Backend: r.b, Logger: quiet, Clock: r.clock,
		RenewBatchSize: DefaultRenewBatchSize, RenewBatchDelay: DefaultRenewBatchDelay})
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	t.Cleanup(r.stop)
	return r
}

func (r *leaseRig) stop() {
	if r.stopped {
		return
	}
	r.stopped = true
	r.e.Stop() // cancels the calls left in flight
	r.sys.Shutdown()
}

func (r *leaseRig) send(msg any) {
	if !r.e.Send(r.key, msg, true) {
		r.t.Fatalf("no lease actor for %T", msg)
	}
}

// run checks that the actor is in rw.from, makes rw.event happen, and checks
// its calls, replies and next state.
func (r *leaseRig) run(rw row) error {
	if s := r.state(); s != rw.from {
		return fmt.Errorf("in state %v, not %v", s, rw.from)
	}
	if err := rw.event.do(r); err != nil {
		return err
	}
	for _, op := range rw.calls {
		select {
		case c := <-r.b.calls:
			if c.op != op {
				return fmt.Errorf("backend call %v, want %v", c.op, op)
			}
			r.inFlight = append(r.inFlight, c)
		case <-time.After(5 * time.Second):
			return fmt.Errorf("no backend call %v", op)
		}
	}
	if err := r.await(rw.to); err != nil {
		return err
	}
	if rw.replies != nil {
		if err := rw.replies(r); err != nil {
			return err
		}
	}
	// A reply nobody expected yet would be there by now: the actor has
	// handled every message the event caused (await), and replies as it
	// handles them.
	for who, c := range r.acquires {
		if len(c) > 0 {
			return fmt.Errorf("acquire %s answered unexpectedly: %+v", who, <-c)
		}
	}
	return nil
}

// state asks the lease actor where it stands.
func (r *leaseRig) state() leaseState {
	reply := make(chan leaseState, 1)
	r.send(&stateQuery{reply: reply})
	select {
	case s := <-reply:
		return s
	case <-time.After(5 * time.Second):
		r.t.Fatal("the lease actor does not answer")
		return 0
	}
}

// await waits until the lease actor is in state want. Answers and ticks reach
// it from other goroutines, so it may take a few asks.
func (r *leaseRig) await(want leaseState) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := r.state()
		if s == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("in state %v, want %v", s, want)
		}
		<-time.After(time.Millisecond)
	}
}

func (r *leaseRig) acquireReply(who string) (messages.AcquireReply, error) {
	select {
	case rep := <-r.acquires[who]:
		delete(r.acquires, who)
		return rep, nil
	default:
		return messages.AcquireReply{}, fmt.Errorf("acquire %s: no reply", who)
	}
}

// scriptedBackend is a backend whose every call waits for the test to answer
// it (or for its context to end).
// scriptedBackend answers Acquire, Renew and Release as the rows script
// them; a lease actor makes no other call.
type scriptedBackend struct {
	backend.Unsupported
	calls chan *scriptCall
	queue bool // Info.Queue
}

type scriptCall struct {
	op     backend.Op
	answer chan scriptAnswer
}

type scriptAnswer struct {
	grant backend.Grant
	err   error
}

func (b *scriptedBackend) do(ctx context.Context, op backend.Op) (backend.Grant, error) {
	c := &scriptCall{op: op, answer: make(chan scriptAnswer, 1)}
	b.calls <- c
	select {
	case a := <-c.answer:
		return a.grant, a.err
	case <-ctx.Done():
		return backend.Grant{}, ctx.Err()
	}
}

func (b *scriptedBackend) Info() backend.Info {
	return backend.Info{Name: "scripted", Queue: b.queue}
}
func (b *scriptedBackend) Acquire(ctx context.Context, _ backend.AcquireRequest) (backend.Grant, error) {
	return b.do(ctx, backend.OpAcquire)
}
func (b *scriptedBackend) Renew(ctx context.Context, _ backend.RenewRequest) (backend.Grant, error) {
	return b.do(ctx, backend.OpRenew)
}
func (b *scriptedBackend) Release(ctx context.Context, _ backend.ReleaseRequest) error {
	_, err := b.do(ctx, backend.OpRelease)
	return err
}
func (b *scriptedBackend) Close() error { return nil }
func (b *scriptedBackend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	return backend.RenewEach(ctx, b, rs)
}
func (b *scriptedBackend) Inspect(context.Context, string) (backend.Holder, bool, error) {
	return backend.Holder{}, false, errors.ErrUnsupported
}
func (b *scriptedBackend) Holders(context.Context, string) ([]backend.Holder, error) {
	return nil, errors.ErrUnsupported
}
func (b *scriptedBackend) List(context.Context, string, func(backend.Holder) bool) error {
	return errors.ErrUnsupported
}
func (b *scriptedBackend) Revoke(context.Context, string, uint64) (backend.Holder, bool, error) {
	return backend.Holder{}, false, errors.ErrUnsupported
}
