package leasehold

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/actors"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/messages"
	"go.opentelemetry.io/otel"
)

// Manager holds any number of named leases on one backend, as one owner. It is
// safe for concurrent use. Create one per process with New and Close it when
// done.
type Manager struct {
	b          backend.Backend
	info       backend.Info // b's, with its TTL limits
	owner      string
	prefix     string
	normalizer func(string) (string, error)
	logger     *slog.Logger

	system    *actor.ActorSystem
	ownSystem bool
	engine    *actors.Engine

	closed atomic.Bool
	// holdings numbers the acquires with a limit above 1, each routed to a
	// lease actor of its own.
	holdings  atomic.Uint64
	closeDone chan struct{}
	closeErr  error

	// subs are the open subscriptions: Close closes them itself, so that
	// one made while Close runs is never left open.
	subsMu sync.Mutex
	subs   map[*Subscription]struct{}
}

// New starts a Manager on backend b. The Manager does not close b: several
// Managers may share one backend, and its owner closes it after them.
func New(b backend.Backend, opts ...Option) (*Manager, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidOption)
	}
	c := managerConfig{logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.owner == "" {
		c.owner = defaultOwner()
	}
	if c.meters == nil {
		c.meters = otel.GetMeterProvider()
	}
	m := &Manager{
		b: b, info: b.Info(), owner: c.owner, prefix: c.prefix, normalizer: c.normalizer, logger: c.logger,
		system: c.system, closeDone: make(chan struct{}),
		subs: map[*Subscription]struct{}{},
	}
	if m.system == nil {
		m.ownSystem = true
		protoLogger := slog.New(plumbingHandler{c.logger.Handler()}).With("component", "protoactor")
		m.system = actor.NewActorSystem(
			actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoLogger }),
			// A dead letter the engine does not mark as expected starts a
			// throttle goroutine for this long: keep it short so Close
			// leaves nothing running.
			actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
		)
	}
	eng, err := actors.Start(m.system.Root, actors.Config{
		Owner: m.owner, Backend: b, Logger: c.logger, MeterProvider: c.meters,
		RenewBatchSize: c.batchSize, RenewBatchDelay: c.batchDelay, Pickup: c.pickup,
	})
	if err != nil {
		if m.ownSystem {
			m.system.Shutdown()
		}
		return nil, err
	}
	m.engine = eng
	return m, nil
}

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(r[:]))
}

// Owner is the identity this Manager holds leases as.
func (m *Manager) Owner() string { return m.owner }

// BackendInfo is what the backend says of itself (its Info).
func (m *Manager) BackendInfo() backend.Info { return m.b.Info() }

// Acquire takes the lease name, waiting as WithWait says (default: one
// attempt). It returns an error matching ErrNotAcquired when the lease stays
// held by another owner (or by this Manager: there is no re-entry), the
// context's error when ctx ends first, ErrInvalidName or ErrInvalidOption for
// bad input (before any backend call), ErrClosed after Close, and a wrapped
// backend error when the backend fails. The lease is auto-renewed unless
// WithoutAutoRenew is given.
func (m *Manager) Acquire(ctx context.Context, name string, opts ...AcquireOption) (l *Lease, err error) {
	start := time.Now()
	var shared bool
	defer func() { m.engine.AcquireDone(ctx, time.Since(start), err, shared) }()
	return m.acquire(ctx, name, &shared, opts...)
}

// acquire is Acquire; it sets *shared once the options ask for a limit
// above 1, for the acquire duration metric.
func (m *Manager) acquire(ctx context.Context, name string, shared *bool, opts ...AcquireOption) (*Lease, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	c, err := acquireOptions(opts)
	if err != nil {
		return nil, err
	}
	*shared = c.limit > 1
	if err := m.info.CheckTTL(c.ttl); err != nil {
		return nil, fmt.Errorf("%w: acquire %q: %w", ErrInvalidOption, name, err)
	}
	if c.limit > 1 {
		if err := m.info.CheckLimit(c.limit); err != nil {
			return nil, fmt.Errorf("%w: acquire %q: %w", ErrInvalidOption, name, err)
		}
	}
	key, err := m.keyOf(name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Held leases first: while their renewals go out late, a new acquire
	// waits (see docs/loss-and-health.md#under-overload).
	if err := m.engine.Admit(ctx); err != nil {
		return nil, err
	}
	route := key
	if c.limit > 1 { // a lease actor of its own (actors.RouteKey)
		route = actors.RouteKey(key, strconv.FormatUint(m.holdings.Add(1), 36))
	}
	// The command and its ticket in one allocation, the reply channel
	// reused: an acquire is the hot path.
	call := &acquireCall{}
	reply := acquireReplies.Get().(chan messages.AcquireReply)
	call.msg = messages.Acquire{
		Name: name, Key: key, TTL: c.ttl, RenewEvery: c.renewEvery, AutoRenew: c.autoRenew,
		Metadata: c.metadata, Wait: c.wait, Limit: c.limit, Ctx: ctx, Ticket: &call.ticket, Reply: reply,
	}
	if !m.engine.Send(route, &call.msg, true) {
		acquireReplies.Put(reply)
		return nil, ErrClosed
	}
	var r messages.AcquireReply
	select {
	case r = <-reply:
	case <-ctx.Done():
		if call.ticket.Abandon() {
			// The lease actor still answers on reply: it is not reused.
			m.engine.Send(route, &messages.CancelWait{Key: key, Ticket: &call.ticket}, false)
			return nil, ctx.Err()
		}
		r = <-reply // granted just now: the reply is on its way
	case <-m.engine.Stopped():
		return nil, ErrClosed
	}
	acquireReplies.Put(reply)
	switch {
	case r.Holding != nil && m.closed.Load() && r.Holding.Err() != nil:
		return nil, ErrClosed // granted, then released by Close: not a lease to hand out
	case r.Holding != nil:
		l := &Lease{m: m, h: r.Holding}
		r.Holding.SetHandle(l)
		return l, nil
	case errors.Is(r.Err, ErrNotAcquired) && c.limit > 1:
		return nil, &NotAcquiredError{Name: name, Holder: r.Holder, HolderExpiresAt: r.HolderExpiresAt, Limit: c.limit}
	case errors.Is(r.Err, ErrNotAcquired):
		return nil, &NotAcquiredError{Name: name, Holder: r.Holder, HolderExpiresAt: r.HolderExpiresAt, HeldHere: r.HeldHere}
	default:
		return nil, r.Err
	}
}

// acquireCall is an Acquire command with its ticket.
type acquireCall struct {
	msg    messages.Acquire
	ticket lease.Ticket
}

// acquireReplies recycles the reply channels of Acquire: a channel goes back
// only once its one reply has been received.
var acquireReplies = sync.Pool{New: func() any { return make(chan messages.AcquireReply, 1) }}

// Do acquires the lease name (honouring WithWait), runs fn as the lease's
// Work, and releases the lease after fn has returned, also when fn panics
// (Manager.Close, too, waits for fn before it releases the lease). It returns
// the error of Acquire (e.g. ErrNotAcquired), else fn's error; when the lease
// was lost during fn the result also matches ErrLost, so a caller can tell that
// fn's work may have overlapped another holder's.
func (m *Manager) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...AcquireOption) (err error) {
	l, err := m.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	work, done := l.Work()
	defer func() {
		done() // first: the release waits for it
		lostErr := l.Err()
		if !errors.Is(lostErr, ErrLost) {
			lostErr = nil
		}
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		relErr := l.Release(relCtx)
		cancel()
		err = errors.Join(err, lostErr, relErr)
	}()
	return fn(work)
}

// releaseTimeout bounds the release Do makes after fn, which must not depend on
// the caller's context still being alive.
const releaseTimeout = 10 * time.Second

// Subscribe returns a subscription to the loss events of every lease this
// Manager holds. Delivery never blocks the Manager: when the buffer is full the
// event is dropped and counted (Subscription.Dropped). A negative buffer counts
// as 0. After Close the subscription's channel is closed at once.
func (m *Manager) Subscribe(buffer int) *Subscription {
	s := newSubscription(max(buffer, 0))
	m.subsMu.Lock()
	defer m.subsMu.Unlock()
	if m.closed.Load() {
		s.sink.Close()
		return s
	}
	m.subs[s] = struct{}{}
	s.unsubscribe = func() {
		m.subsMu.Lock()
		delete(m.subs, s)
		m.subsMu.Unlock()
		m.engine.Unsubscribe(s.sink)
	}
	m.engine.Subscribe(s.sink)
	return s
}

// Held lists the leases this Manager holds now, sorted by name (the
// holdings of one name under a limit above 1 each, by token).
func (m *Manager) Held() []LeaseInfo {
	hs := m.engine.Holdings()
	out := make([]LeaseInfo, 0, len(hs))
	for _, h := range hs {
		if h.Err() != nil {
			continue // its local deadline passed; the lease actor has yet to notice
		}
		out = append(out, LeaseInfo{Name: h.Name, Owner: h.Owner, Token: h.Token, ExpiresAt: h.ExpiresAt(), Metadata: h.Metadata, Limit: int(h.Limit)})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Name < out[j].Name || (out[i].Name == out[j].Name && out[i].Token < out[j].Token)
	})
	return out
}

// Close releases every lease held (each handle ends with ErrReleased; a
// release is not a loss, so no LostEvent is sent). It goes in this order:
// no new Acquire or Work is taken; the context of every lease's Work (Do's
// function, partition's OnAssigned, election's OnStartedLeading) ends; Close
// waits, under ctx, for that work to return, the leases staying held and
// renewed meanwhile (work that stops its lease's renewals after a grace of
// its own lets that lease end at its TTL instead); then each lease is
// released, so that the next holder never starts while this one's work
// runs. Close also answers every waiting
// Acquire with ErrClosed, cancels every backend call in flight, stops every
// actor and timer the Manager started and closes the subscriptions. After
// Close every Manager call returns ErrClosed, and no Acquire returns a live
// lease. It is idempotent and never panics, whatever ctx.
//
// The releases run under ctx (each also bounded by a 10 s timeout). When ctx
// ends first, or has already ended (a signal.NotifyContext after SIGTERM,
// say), Close stops at once: every handle still ends with ErrReleased, but
// the releases not yet confirmed are left to the store, which frees those
// names when their TTL ends. Close then returns ctx's error.
func (m *Manager) Close(ctx context.Context) error {
	if m.closed.Swap(true) { // not the first Close: wait for the first
		select {
		case <-m.closeDone:
			return m.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(m.closeDone)

	if err := m.endWork(ctx); err != nil {
		m.closeErr = err
	}
	released := make(chan struct{})
	m.engine.Shutdown(&messages.Shutdown{Ctx: ctx, Reply: released})
	select {
	case <-released:
	case <-ctx.Done():
		m.closeErr = ctx.Err()
	}
	m.engine.Stop() // quick: the backend actor cancels calls in flight
	if m.ownSystem {
		m.system.Shutdown()
	}
	m.subsMu.Lock()
	for s := range m.subs {
		s.sink.Close()
	}
	clear(m.subs)
	m.subsMu.Unlock()
	return m.closeErr
}

// endWork ends the Work of every lease held and waits, under ctx, until each
// such lease has been released after its work returned, or has ended.
func (m *Manager) endWork(ctx context.Context) error {
	type pending struct {
		l *Lease
		e *ending
	}
	var wait []pending
	for _, h := range m.engine.Holdings() {
		l, ok := h.Handle().(*Lease)
		if !ok {
			continue
		}
		// (A Lease that never ran Work has no workSet; one started from now
		// on sees the Manager closed.)
		w := l.w.Load()
		if w == nil || !w.busy() {
			continue // no work: the engine releases it at Shutdown
		}
		if e := w.end(l, context.Background(), "Manager.Close"); e != nil {
			wait = append(wait, pending{l, e})
		}
	}
	for _, p := range wait {
		select {
		case <-p.e.sent:
		case <-p.l.h.Context().Done(): // lost while its work ran
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
