package leaseholdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// queueCases check the Managers' side of the store's waiter queue and
// hand-off (backend/queue.go) on a store whose Info says Queue; they are
// skipped on others.
func (s *suite) queueCases() []testCase {
	return []testCase{
		{"WaitersAcrossManagersGoInArrivalOrder", s.qFIFO},
		{"LocalWaiterQueuesOnceItsManagersHoldingEnds", s.qLocalNextJoinsAfterHolding},
		{"CancelledWaiterLeavesTheQueue", s.qCancelLeaves},
		{"TimedOutWaiterLeavesTheQueue", s.qTimeoutLeaves},
		{"ClosedManagerLeavesTheQueue", s.qCloseLeaves},
		{"WaiterQueuedWhileItsManagerClosesLeaves", s.qCloseDuringAcquire},
		{"DeadContenderDelaysOthersAtMostItsPickupWindow", s.qDeadContender},
	}
}

func (s *suite) queuePair(t *testing.T) pair {
	p := s.pair(t)
	if !p.raw.Info().Queue {
		t.Skipf("%s keeps no waiter queue", p.raw.Info().Name)
	}
	return p
}

// handOffMeter reads a Manager's leasehold.handoffs counter by "via".
type handOffMeter struct{ reader *sdkmetric.ManualReader }

func newHandOffMeter(t *testing.T) (handOffMeter, leasehold.Option) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	return handOffMeter{reader}, leasehold.WithMeterProvider(provider)
}

func (h handOffMeter) count(t *testing.T, via string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(ctxT(t), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			sum, ok := mt.Data.(metricdata.Sum[int64])
			if !ok || mt.Name != "leasehold.handoffs" {
				continue
			}
			for _, dp := range sum.DataPoints {
				if v, _ := dp.Attributes.Value("leasehold.handoff.via"); v.AsString() == via {
					return dp.Value
				}
			}
		}
	}
	return 0
}

type acquired struct {
	l   *leasehold.Lease
	err error
}

// waitFor starts m's waiting Acquire of name and returns its outcome's
// channel, once the store has queued it (p.f.QueuedAttempts grew: a poll of
// a waiter already queued, which may come first, does not count, so the
// waiters started one after another stand in the store's queue in that
// order).
func waitFor(t *testing.T, p pair, ctx context.Context, m *leasehold.Manager, name string, opts ...leasehold.AcquireOption) <-chan acquired {
	t.Helper()
	before := p.f.QueuedAttempts.Load()
	ch := make(chan acquired, 1)
	opts = append([]leasehold.AcquireOption{leasehold.WithWait(leasehold.WaitForever)}, opts...)
	go func() {
		l, err := m.Acquire(ctx, name, opts...)
		ch <- acquired{l, err}
	}()
	p.s.eventually(t, m.Owner()+"'s attempt to be queued", func() bool { return p.f.QueuedAttempts.Load() > before })
	return ch
}

func (s *suite) got(t *testing.T, ch <-chan acquired, who string) *leasehold.Lease {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("%s: %v", who, a.err)
		}
		return a.l
	case <-time.After(s.patience):
		t.Fatalf("%s did not get the lease", who)
	}
	return nil
}

func notYet(t *testing.T, ch <-chan acquired, who string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s got %v, %v out of turn", who, a.l, a.err)
	default:
	}
}

// Three Managers: the second and third wait in that order; each release
// hands the name to the next, whose Acquire returns on the store's notice
// (no round trip of its own, where the store sends notices).
func (s *suite) qFIFO(t *testing.T) {
	p := s.queuePair(t)
	meter, withMeter := newHandOffMeter(t)
	// o2's window is long (the lease's TTL is 30 s): on a loaded machine
	// it neither polls again nor finds too little of the window left
	// before the notice comes, so it takes the name from the notice alone.
	m1, m3 := p.manager(t, "o1"), p.manager(t, "o3")
	m2 := p.manager(t, "o2", withMeter, leasehold.WithPickupWindow(7*time.Second))
	l1 := mustAcquire(t, m1, "job")
	c2 := waitFor(t, p, ctxT(t), m2, "job")
	c3 := waitFor(t, p, ctxT(t), m3, "job")
	acquiresBefore := p.f.AcquiresBy("o2")
	if err := l1.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l2 := s.got(t, c2, "the first waiter")
	notYet(t, c3, "the second waiter")
	if l2.Token() <= l1.Token() {
		t.Errorf("token %d after %d", l2.Token(), l1.Token())
	}
	if p.raw.Info().HandOffNotices {
		if n := meter.count(t, "notice"); n != 1 {
			t.Errorf("hand-offs by notice = %d, want 1", n)
		}
		if n := p.f.AcquiresBy("o2") - acquiresBefore; n != 0 {
			t.Errorf("o2 made %d acquire calls between the release and the hand-over, want none", n)
		}
	}
	if err := l2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l3 := s.got(t, c3, "the second waiter")
	if l3.Token() <= l2.Token() {
		t.Errorf("token %d after %d", l3.Token(), l2.Token())
	}
	// A lease taken by hand-off renews to its TTL like any other.
	if err := l3.Renew(ctxT(t), 0); err != nil {
		t.Errorf("Renew of a handed-over lease: %v", err)
	}
}

// qLocalNextJoinsAfterHolding pins what a Manager's second local waiter
// does: it stands in the store's queue only once its Manager's holding of the
// name has ended (one ownership call per key at a time), so another
// Manager's waiter that queued meanwhile, later than it, is served first:
// the name goes round the processes that want it.
func (s *suite) qLocalNextJoinsAfterHolding(t *testing.T) {
	p := s.queuePair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	l1 := mustAcquire(t, m1, "job")
	// o1's second waiter, in o1's local queue before o2's waiter arrives.
	queued := newSentContext()
	c1 := make(chan acquired, 1)
	go func() {
		l, err := m1.Acquire(queued, "job", leasehold.WithWait(leasehold.WaitForever))
		c1 <- acquired{l, err}
	}()
	<-queued.sent
	c2 := waitFor(t, p, ctxT(t), m2, "job")
	if n := p.f.AcquiresBy("o1"); n != 1 {
		t.Errorf("o1 made %d acquire calls while it held the name, want 1 (its own grant): its next waiter asks only once the holding ends", n)
	}
	if err := l1.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l2 := s.got(t, c2, "o2's waiter (first in the store's queue)")
	notYet(t, c1, "o1's second waiter")
	s.eventually(t, "o1's second waiter to stand in the store's queue", func() bool { return p.f.AcquiresBy("o1") > 1 })
	if err := l2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l3 := s.got(t, c1, "o1's second waiter")
	if l3.Token() <= l2.Token() || l2.Token() <= l1.Token() {
		t.Errorf("tokens %d, %d, %d: not increasing", l1.Token(), l2.Token(), l3.Token())
	}
}

// leftFree checks that releasing l leaves the name free: no hand-off was
// made to a waiter that left.
func leftFree(t *testing.T, p pair, l *leasehold.Lease) {
	t.Helper()
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if h, held, err := p.raw.Inspect(ctxT(t), p.prefix+"job"); err != nil || held {
		t.Fatalf("after the release: %+v held=%v err=%v; want the name free (the waiter left the queue)", h, held, err)
	}
}

func (s *suite) qCancelLeaves(t *testing.T) {
	p := s.queuePair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	l1 := mustAcquire(t, m1, "job")
	ctx, cancel := context.WithCancel(ctxT(t))
	releases := p.f.ReleasesDone.Load()
	c2 := waitFor(t, p, ctx, m2, "job")
	cancel()
	if a := <-c2; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, %v", a.l, a.err)
	}
	s.eventually(t, "the waiter's clean-up release", func() bool { return p.f.ReleasesDone.Load() > releases })
	leftFree(t, p, l1)
}

func (s *suite) qTimeoutLeaves(t *testing.T) {
	p := s.queuePair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	l1 := mustAcquire(t, m1, "job")
	releases := p.f.ReleasesDone.Load()
	c2 := waitFor(t, p, ctxT(t), m2, "job", leasehold.WithWait(s.short))
	if a := <-c2; !errors.Is(a.err, leasehold.ErrNotAcquired) {
		t.Fatalf("timed-out waiter: %v, %v", a.l, a.err)
	}
	s.eventually(t, "the waiter's clean-up release", func() bool { return p.f.ReleasesDone.Load() > releases })
	leftFree(t, p, l1)
}

func (s *suite) qCloseLeaves(t *testing.T) {
	p := s.queuePair(t)
	m1 := p.manager(t, "o1")
	m2, err := leasehold.New(p.b, leasehold.WithOwner("o2"), leasehold.WithKeyPrefix(p.prefix))
	if err != nil {
		t.Fatal(err)
	}
	l1 := mustAcquire(t, m1, "job")
	c2 := waitFor(t, p, ctxT(t), m2, "job")
	if err := m2.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if a := <-c2; !errors.Is(a.err, leasehold.ErrClosed) {
		t.Fatalf("waiter of a closed Manager: %v, %v", a.l, a.err)
	}
	leftFree(t, p, l1)
}

// Close comes while a waiter's first acquire is on its way; the store queues
// it after Close began: the refusal's answer, seen while closing, still
// takes the entry out.
func (s *suite) qCloseDuringAcquire(t *testing.T) {
	p := s.queuePair(t)
	m1 := p.manager(t, "o1")
	m2, err := leasehold.New(p.b, leasehold.WithOwner("o2"), leasehold.WithKeyPrefix(p.prefix))
	if err != nil {
		t.Fatal(err)
	}
	l1 := mustAcquire(t, m1, "job")
	p.f.AcquireDelay.Store(int64(s.short / 2)) // the acquire is applied after this, whatever its context
	t.Cleanup(func() { p.f.AcquireDelay.Store(0) })
	before := p.f.Acquires.Load()
	c2 := make(chan error, 1)
	go func() {
		_, err := m2.Acquire(context.Background(), "job", leasehold.WithWait(leasehold.WaitForever))
		c2 <- err
	}()
	s.eventually(t, "o2's acquire to be on its way", func() bool { return p.f.Acquires.Load() > before })
	if err := m2.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-c2; !errors.Is(err, leasehold.ErrClosed) {
		t.Fatalf("waiter of a closed Manager: %v", err)
	}
	p.f.AcquireDelay.Store(0)
	if p.f.Queued.Load() == 0 {
		t.Skip("the acquire was answered as cancelled, not queued: nothing to leave")
	}
	leftFree(t, p, l1)
}

// A contender that died while queued (its entry is there, nobody picks up
// its hand-off) costs the next waiter at most its pickup window.
func (s *suite) qDeadContender(t *testing.T) {
	p := s.queuePair(t)
	meter, withMeter := newHandOffMeter(t)
	m1 := p.manager(t, "o1")
	m2 := p.manager(t, "o2", withMeter, leasehold.WithPickupWindow(s.short/2))
	l1 := mustAcquire(t, m1, "job")
	dead, err := p.raw.Acquire(ctxT(t), backend.AcquireRequest{
		Key: p.prefix + "job", Owner: "dead", Attempt: "dead.1", TTL: time.Minute, Wait: true,
		Queue: backend.QueueRequest{EntryTTL: time.Minute, Pickup: s.tiny, Notify: "nobody"},
	})
	if err != nil || !dead.Queued {
		t.Fatalf("the dead contender's enqueue: %+v, %v", dead, err)
	}
	c2 := waitFor(t, p, ctxT(t), m2, "job")
	start := time.Now()
	if err := l1.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l2 := s.got(t, c2, "the waiter behind the dead contender")
	t.Logf("the waiter got the name %v after the release (pickup windows: dead %v, its own %v)", time.Since(start), s.tiny, s.short/2)
	if l2.Token() <= l1.Token() {
		t.Errorf("token %d after %d", l2.Token(), l1.Token())
	}
	if n := meter.count(t, "poll"); n != 1 {
		t.Errorf("hand-offs by poll (the fallback) = %d, want 1", n)
	}
}
