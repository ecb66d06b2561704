package leaseholdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// Acquire: busy names, waits, hand-offs, FIFO waiters, independent names, owners contending.

func (s *suite) mBusy(t *testing.T) {
	p := s.pair(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2", leasehold.WithLogger(logger))
	mustAcquire(t, m1, "job")
	l, err := m2.Acquire(ctxT(t), "job")
	if l != nil {
		t.Fatal("got a lease while another owner holds it")
	}
	wantNotAcquired(t, err)
	var na *leasehold.NotAcquiredError
	if !errors.As(err, &na) || na.Holder != "o1" {
		t.Errorf("err = %#v, want a NotAcquiredError naming holder o1", err)
	}
	if logs.Len() > 0 {
		t.Errorf("a busy lease was logged as an error: %s", logs.String())
	}
}

func (s *suite) mWaitTimeout(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	mustAcquire(t, m1, "job")
	start := time.Now()
	_, err := m2.Acquire(ctxT(t), "job", leasehold.WithWait(200*time.Millisecond))
	wantNotAcquired(t, err)
	if d := time.Since(start); d < 200*time.Millisecond || d > s.patience {
		t.Errorf("waited %v, want about 200ms", d)
	}
}

func (s *suite) mWaitForever(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	// Renewed every 100 ms, so that it renews many times while the waiter
	// waits; with a minute's TTL, so that a slow machine never loses it.
	holder := mustAcquire(t, m1, "job", leasehold.WithTTL(time.Minute), leasehold.WithRenewEvery(s.often))
	ctx, cancel := context.WithTimeout(context.Background(), 3*s.short)
	defer cancel()
	_, err := m2.Acquire(ctx, "job", leasehold.WithWait(leasehold.WaitForever))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's DeadlineExceeded", err)
	}
	// The holder was unaffected by the waiter giving up (and auto-renewed
	// meanwhile).
	if holder.Err() != nil {
		t.Fatalf("holder ended: %v", holder.Err())
	}
	if err := holder.Renew(ctxT(t), 0); err != nil {
		t.Fatalf("holder Renew: %v", err)
	}
	// A cancelled waiter leaves no trace: the next release hands over normally.
	if err := holder.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, m2, "job")
}

func (s *suite) mHandOff(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	holder := mustAcquire(t, m1, "job")
	got := make(chan *leasehold.Lease, 1)
	before := p.f.Acquires.Load()
	go func() {
		l, err := m2.Acquire(context.Background(), "job", leasehold.WithWait(s.patience))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	s.eventually(t, "the waiter to find the key busy", func() bool { return p.f.Acquires.Load() > before })
	if err := holder.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	if l.Token() <= holder.Token() {
		t.Errorf("token %d after %d", l.Token(), holder.Token())
	}
}

func (s *suite) mHandOffOnExpiry(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	holder := mustAcquire(t, m1, "job", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	l, err := m2.Acquire(ctxT(t), "job", leasehold.WithWait(s.patience))
	if err != nil {
		t.Fatal(err)
	}
	// The old holder must have known it lost before the new one got it.
	select {
	case <-holder.Lost():
	default:
		t.Error("new holder granted while the old handle still believed it held the lease")
	}
	if l.Token() <= holder.Token() {
		t.Errorf("token %d after %d", l.Token(), holder.Token())
	}
}

func (s *suite) mNoReentry(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	first := mustAcquire(t, m, "job")
	_, err := m.Acquire(ctxT(t), "job")
	wantNotAcquired(t, err)
	// Local waiters are served first come, first served.
	const n = 4
	order := make(chan int, n)
	leases := make(chan *leasehold.Lease, n)
	var wg sync.WaitGroup
	for i := range n {
		queued := newSentContext()
		wg.Go(func() {
			l, err := m.Acquire(queued, "job", leasehold.WithWait(s.patience))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			leases <- l
			time.Sleep(5 * time.Millisecond) // the work
			_ = l.Release(context.Background())
		})
		<-queued.sent // waiter i is in the queue before waiter i+1 starts
	}
	_ = first.Release(ctxT(t))
	wg.Wait()
	close(order)
	want := 0
	for i := range order {
		if i != want {
			t.Errorf("waiter %d served in place %d", i, want)
		}
		want++
	}
}

// sentContext tells when Manager.Acquire has sent its request: Acquire asks
// its context for Done only once the request is on its way to the lease
// actor (it checks Err before), so the first call to Done is the signal that
// the waiter is queued, in the order of the Managers' mailboxes.
type sentContext struct {
	context.Context
	once sync.Once
	sent chan struct{}
}

func newSentContext() *sentContext {
	return &sentContext{Context: context.Background(), sent: make(chan struct{})}
}

func (c *sentContext) Done() <-chan struct{} {
	c.once.Do(func() { close(c.sent) })
	return c.Context.Done()
}

func (s *suite) mIndependentNames(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	held := mustAcquire(t, m1, "a")
	waiting := make(chan error, 1)
	go func() {
		l, err := m2.Acquire(context.Background(), "a", leasehold.WithWait(s.patience))
		if err == nil {
			err = l.Release(ctxT(t))
		}
		waiting <- err
	}()
	// Every other name is served while "a"'s waiter still waits: were they
	// queued behind it, they would be served only once its wait had ended.
	for i := range 20 {
		l := mustAcquire(t, m2, fmt.Sprintf("b%d", i))
		_ = l.Release(ctxT(t))
	}
	select {
	case err := <-waiting:
		t.Fatalf("the waiter for %q returned (%v) before the other names were served", "a", err)
	default:
	}
	if err := held.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Errorf("the waiter for %q after its release: %v", "a", err)
	}
}

func (s *suite) mTwoOwners(t *testing.T) {
	p := s.pair(t)
	ms := []*leasehold.Manager{p.manager(t, "o1"), p.manager(t, "o2"), p.manager(t, "o3")}
	// Each manager repeatedly does work under the lease; work never overlaps.
	var mu sync.Mutex
	inside, maxInside, total := 0, 0, 0
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			for range 5 {
				err := m.Do(context.Background(), "job", func(ctx context.Context) error {
					mu.Lock()
					inside++
					maxInside = max(maxInside, inside)
					total++
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
					mu.Lock()
					inside--
					mu.Unlock()
					return nil
				}, leasehold.WithWait(s.patience))
				if err != nil {
					t.Errorf("%s: %v", m.Owner(), err)
				}
			}
		})
	}
	wg.Wait()
	if maxInside != 1 || total != 15 {
		t.Errorf("max holders at once %d (want 1), work done %d (want 15)", maxInside, total)
	}
}
