package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// managerCases check the semantics matrix through Managers on the backend.
func (s *suite) managerCases() []testCase {
	return []testCase{
		{"BusyIsErrNotAcquiredWithoutErrorLog", s.mBusy},
		{"WaitRunsOut", s.mWaitTimeout},
		{"WaitForeverUntilContextEnds", s.mWaitForever},
		{"WaiterGetsLeaseOnRelease", s.mHandOff},
		{"WaiterGetsLeaseOnHolderExpiry", s.mHandOffOnExpiry},
		{"InvalidNamesRejectedBeforeBackend", s.mInvalidNames},
		{"InvalidOptionsRejectedBeforeBackend", s.mInvalidOptions},
		{"ExpiryWithoutRenewalIsLoss", s.mExpiry},
		{"UnconfirmedRenewalIsLossByLocalDeadline", s.mRenewImpossible},
		{"RejectedRenewalIsLoss", s.mRejected},
		{"RenewOnReleasedHandle", s.mRenewReleased},
		{"RenewWithCancelledContext", s.mRenewCancelled},
		{"ExplicitRenewKeepsTokenExtendsExpiry", s.mExplicitRenew},
		{"ReleaseIsIdempotent", s.mDoubleRelease},
		{"FencingTokensIncrease", s.mFencing},
		{"NoReentryAndFIFOWaiters", s.mNoReentry},
		{"DifferentNamesNeverBlock", s.mIndependentNames},
		{"TwoOwnersContend", s.mTwoOwners},
		{"StaleOwnerCannotTouchNewHolding", s.mStaleOwner},
		{"AutoRenewOutlivesSeveralTTLs", s.mAutoRenew},
		{"AbandonedGrantIsReleased", s.mAbandonedGrant},
		{"AmbiguousAcquireIsReleased", s.mAmbiguousAcquire},
		{"BackendFaultIsNotErrNotAcquired", s.mBackendFault},
		{"DoRunsAndReleases", s.mDo},
		{"DoReportsLoss", s.mDoLost},
		{"HeldAndMetadata", s.mHeld},
		{"CloseReleasesEverything", s.mClose},
		{"BatchedRenewalsMixedResults", s.mBatchMixed},
		{"BatchFailureFailsClosedPerLease", s.mBatchFailure},
		{"NoRenewalStarvesWhenBatchesAreFull", s.mBatchStarvation},
	}
}

// pair is a backend with a counting wrapper and this test's key prefix.
type pair struct {
	f      *Faulty
	b      backend.Backend // what Managers get (f, plus notifications)
	raw    backend.Backend
	prefix string
}

func (s *suite) pair(t *testing.T) pair {
	raw := s.newBackend(t)
	f, b := Wrap(raw)
	return pair{f: f, b: b, raw: raw, prefix: uniq(t)}
}

func (p pair) manager(t *testing.T, owner string, opts ...leasehold.Option) *leasehold.Manager {
	return newManager(t, p.b, owner, p.prefix, opts...)
}

func mustAcquire(t *testing.T, m *leasehold.Manager, name string, opts ...leasehold.AcquireOption) *leasehold.Lease {
	t.Helper()
	l, err := m.Acquire(ctxT(t), name, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q) by %s: %v", name, m.Owner(), err)
	}
	return l
}

func wantNotAcquired(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatalf("err = %v, want ErrNotAcquired", err)
	}
}

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
	if d := time.Since(start); d < 200*time.Millisecond || d > patience {
		t.Errorf("waited %v, want about 200ms", d)
	}
}

func (s *suite) mWaitForever(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	// Renewed every 100 ms, so that it renews many times while the waiter
	// waits; with a minute's TTL, so that a slow machine never loses it.
	holder := mustAcquire(t, m1, "job", leasehold.WithTTL(time.Minute), leasehold.WithRenewEvery(100*time.Millisecond))
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
		l, err := m2.Acquire(context.Background(), "job", leasehold.WithWait(patience))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	eventually(t, "the waiter to find the key busy", func() bool { return p.f.Acquires.Load() > before })
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
	l, err := m2.Acquire(ctxT(t), "job", leasehold.WithWait(patience))
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

func (s *suite) mInvalidNames(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	for _, name := range []string{"", " ", "\t\n", "a\x00b", "bad\xffutf8", strings.Repeat("n", 201-len([]rune(p.prefix)))} {
		_, err := m.Acquire(ctxT(t), name)
		if !errors.Is(err, leasehold.ErrInvalidName) {
			t.Errorf("Acquire(%.40q) = %v, want ErrInvalidName", name, err)
		}
		if err := m.Do(ctxT(t), name, func(context.Context) error { return nil }); !errors.Is(err, leasehold.ErrInvalidName) {
			t.Errorf("Do(%.40q) = %v, want ErrInvalidName", name, err)
		}
	}
	failing := newManager(t, p.b, "o2", "", leasehold.WithKeyNormalizer(func(n string) (string, error) {
		if n == "bad" {
			return "", errors.New("no such tenant")
		}
		return "", nil // an invalid key
	}))
	for _, name := range []string{"bad", "empty-key"} {
		if _, err := failing.Acquire(ctxT(t), name); !errors.Is(err, leasehold.ErrInvalidName) {
			t.Errorf("normalizer case %q: %v, want ErrInvalidName", name, err)
		}
	}
	if n := p.f.Calls(); n != 0 {
		t.Errorf("%d backend calls for invalid names, want 0", n)
	}
}

func (s *suite) mInvalidOptions(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	cases := [][]leasehold.AcquireOption{
		{leasehold.WithTTL(time.Millisecond - 1)},
		{leasehold.WithTTL(0)},
		{leasehold.WithTTL(leasehold.MaxTTL + 1)},
		{leasehold.WithRenewEvery(0)},
		{leasehold.WithRenewEvery(-time.Second)},
		{leasehold.WithTTL(time.Second), leasehold.WithRenewEvery(time.Second)},
		{leasehold.WithRenewEvery(2 * time.Second), leasehold.WithTTL(time.Second)},
		{leasehold.WithWait(-2)},
		{leasehold.WithWait(-time.Second)},
		{leasehold.WithMetadata(strings.Repeat("m", backend.MaxMetadataBytes+1))},
		{leasehold.WithMetadata("nul\x00")},
	}
	for i, opts := range cases {
		if _, err := m.Acquire(ctxT(t), "job", opts...); !errors.Is(err, leasehold.ErrInvalidOption) {
			t.Errorf("case %d: %v, want ErrInvalidOption", i, err)
		}
	}
	if _, err := leasehold.New(p.b, leasehold.WithOwner("")); !errors.Is(err, leasehold.ErrInvalidOption) {
		t.Errorf("WithOwner(\"\"): %v, want ErrInvalidOption", err)
	}
	if n := p.f.Calls(); n != 0 {
		t.Errorf("%d backend calls for invalid options, want 0", n)
	}
	// Edges that are valid.
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Hour), leasehold.WithRenewEvery(time.Hour-1), leasehold.WithWait(leasehold.WaitForever))
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// lostWithin waits for l to be lost and checks every signal of the loss.
func lostWithin(t *testing.T, l *leasehold.Lease, sub *leasehold.Subscription, within time.Duration, reason leasehold.LostReason) {
	t.Helper()
	waitClosed(t, "loss", l.Lost(), within)
	if !errors.Is(l.Err(), leasehold.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", l.Err())
	}
	if !errors.Is(context.Cause(l.Context()), leasehold.ErrLost) || l.Context().Err() == nil {
		t.Errorf("Context cause = %v, want ErrLost", context.Cause(l.Context()))
	}
	select {
	case ev := <-sub.Events():
		if ev.Name != l.Name() || ev.Token != l.Token() || ev.Reason != reason || !errors.Is(ev.Err, leasehold.ErrLost) || ev.Owner != l.Owner() {
			t.Errorf("event %+v, want %s lost with reason %v", ev, l.Name(), reason)
		}
	case <-time.After(patience):
		t.Error("no LostEvent")
	}
}

// failedClosedBy checks that l counts as lost at by, a TTL after its
// Acquire returned: its local deadline (the acquire's send time plus TTL
// minus the margin) is earlier still, and the handle checks it by itself, so
// no timer, however late on a loaded machine, is needed for this to hold.
func failedClosedBy(t *testing.T, l *leasehold.Lease, by time.Time) {
	t.Helper()
	time.Sleep(time.Until(by)) // the point in time under test, not a synchronisation
	if err := l.Err(); !errors.Is(err, leasehold.ErrLost) {
		t.Errorf("%s a TTL after its Acquire returned: Err() = %v, want ErrLost (fail closed)", l.Name(), err)
	}
}

func (s *suite) mExpiry(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(4)
	l := mustAcquire(t, m, "job", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	failedClosedBy(t, l, time.Now().Add(s.short))
	lostWithin(t, l, sub, patience, leasehold.ReasonExpired)
	if len(m.Held()) != 0 {
		t.Errorf("Held() = %v after loss", m.Held())
	}
}

func (s *suite) mRenewImpossible(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(4)
	ttl := 4 * s.short // room for several retries
	p.f.FailRenew.Store(true)
	l := mustAcquire(t, m, "job", leasehold.WithTTL(ttl))
	failedClosedBy(t, l, time.Now().Add(ttl))
	lostWithin(t, l, sub, patience, leasehold.ReasonExpired)
	if n := p.f.Renews.Load(); n < 2 {
		t.Errorf("%d renewal attempts, want retries until the deadline", n)
	}
}

func (s *suite) mRejected(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(4)
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Minute))
	// Someone with the owner's credentials deletes it behind its back.
	if err := p.raw.Release(ctxT(t), backend.ReleaseRequest{Key: p.prefix + "job", Owner: "o1", Attempt: p.f.AttemptOf(p.prefix + "job"), Token: l.Token()}); err != nil {
		t.Fatal(err)
	}
	err := l.Renew(ctxT(t), 0)
	if !errors.Is(err, leasehold.ErrLost) || !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("Renew = %v, want ErrLost (ErrNotHeld)", err)
	}
	lostWithin(t, l, sub, patience, leasehold.ReasonRejected)
}

func (s *suite) mRenewReleased(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job", leasehold.WithoutAutoRenew())
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	before := p.f.Calls()
	if err := l.Renew(ctxT(t), 0); !errors.Is(err, leasehold.ErrReleased) {
		t.Fatalf("Renew after Release = %v, want ErrReleased", err)
	}
	if p.f.Calls() != before {
		t.Error("Renew on a released handle called the backend")
	}
	select {
	case <-l.Lost():
		t.Error("Lost() closed by a release")
	default:
	}
	if !errors.Is(context.Cause(l.Context()), leasehold.ErrReleased) {
		t.Errorf("Context cause = %v, want ErrReleased", context.Cause(l.Context()))
	}
}

func (s *suite) mRenewCancelled(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job", leasehold.WithoutAutoRenew())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := p.f.Calls()
	if err := l.Renew(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Renew = %v, want context.Canceled", err)
	}
	if p.f.Calls() != before {
		t.Error("Renew with a cancelled context called the backend")
	}
	if l.Err() != nil {
		t.Errorf("handle ended: %v", l.Err())
	}
	if err := l.Renew(ctxT(t), -time.Second); !errors.Is(err, leasehold.ErrInvalidOption) {
		t.Errorf("Renew(-1s) = %v, want ErrInvalidOption", err)
	}
}

func (s *suite) mExplicitRenew(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Minute), leasehold.WithoutAutoRenew())
	exp, tok := l.ExpiresAt(), l.Token()
	time.Sleep(10 * time.Millisecond) // so that the store's clock moves on
	if err := l.Renew(ctxT(t), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if l.Token() != tok || !l.ExpiresAt().After(exp.Add(30*time.Second)) {
		t.Errorf("after Renew(2m): token %d (was %d), expires %v (was %v)", l.Token(), tok, l.ExpiresAt(), exp)
	}
	// Concurrent explicit renewals all get answers.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := l.Renew(context.Background(), 0); err != nil {
				t.Errorf("concurrent Renew: %v", err)
			}
		})
	}
	wg.Wait()
}

func (s *suite) mDoubleRelease(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job")
	before := p.f.Releases.Load()
	for range 3 {
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.f.Releases.Load() - before; n != 1 {
		t.Errorf("%d backend releases for three Release calls, want 1", n)
	}
	// After loss: nil, no backend call.
	lost := mustAcquire(t, m, "other", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	waitClosed(t, "loss", lost.Lost(), patience)
	eventually(t, "the cleanup release after loss", func() bool { return p.f.Releases.Load()-before == 2 })
	if err := lost.Release(ctxT(t)); err != nil {
		t.Errorf("Release after loss = %v, want nil", err)
	}
	if n := p.f.Releases.Load() - before; n != 2 {
		t.Errorf("Release after loss called the backend (%d releases)", n)
	}
}

func (s *suite) mFencing(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	var last uint64
	check := func(l *leasehold.Lease, how string) {
		t.Helper()
		if l.Token() <= last {
			t.Fatalf("%s: token %d, want > %d", how, l.Token(), last)
		}
		last = l.Token()
	}
	l := mustAcquire(t, m1, "job")
	check(l, "first grant")
	if err := l.Renew(ctxT(t), 0); err != nil || l.Token() != last {
		t.Fatalf("renew changed the token or failed: %d, %v", l.Token(), err)
	}
	_ = l.Release(ctxT(t))
	l = mustAcquire(t, m1, "job", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	check(l, "after release, same owner")
	l = mustAcquire(t, m2, "job", leasehold.WithWait(patience))
	check(l, "takeover after expiry")
	_ = l.Release(ctxT(t))
	l = mustAcquire(t, m1, "job")
	check(l, "after another owner's release")
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
			l, err := m.Acquire(queued, "job", leasehold.WithWait(patience))
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
	mustAcquire(t, m1, "a")
	waiting := make(chan error, 1)
	go func() {
		_, err := m2.Acquire(context.Background(), "a", leasehold.WithWait(time.Second))
		waiting <- err
	}()
	start := time.Now()
	for i := range 20 {
		l := mustAcquire(t, m2, fmt.Sprintf("b%d", i))
		_ = l.Release(ctxT(t))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("other names took %v while %q had a waiter", d, "a")
	}
	wantNotAcquired(t, <-waiting)
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
				}, leasehold.WithWait(patience))
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

func (s *suite) mStaleOwner(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	old := mustAcquire(t, m1, "job", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	cur := mustAcquire(t, m2, "job", leasehold.WithWait(patience))
	ctx, key := ctxT(t), p.prefix+"job"
	curAttempt := p.f.AttemptOf(key)
	if _, err := p.raw.Renew(ctx, backend.RenewRequest{Key: key, Owner: "o1", Attempt: curAttempt, Token: old.Token(), TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("stale owner's Renew = %v, want ErrNotHeld", err)
	}
	if _, err := p.raw.Renew(ctx, backend.RenewRequest{Key: key, Owner: "o1", Attempt: curAttempt, Token: cur.Token(), TTL: time.Minute}); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("stranger with the current token: Renew = %v, want ErrNotHeld", err)
	}
	_ = p.raw.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o1", Attempt: curAttempt, Token: old.Token()})
	_ = p.raw.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o1", Attempt: curAttempt})
	_ = p.raw.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o2", Attempt: "stale", Token: old.Token()})
	if err := cur.Renew(ctx, 0); err != nil {
		t.Errorf("current holder's Renew after stale releases: %v", err)
	}
	if err := old.Release(ctx); err != nil {
		t.Errorf("stale handle's Release = %v, want nil", err)
	}
	if cur.Err() != nil {
		t.Errorf("current holding ended: %v", cur.Err())
	}
}

func (s *suite) mAutoRenew(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(1)
	ttl := 3 * s.short // a renewal may take up to 0.57 TTL: room on a loaded machine
	l := mustAcquire(t, m, "job", leasehold.WithTTL(ttl))
	first := l.ExpiresAt()
	time.Sleep(3 * ttl) // the lease must outlive this
	if err := l.Err(); err != nil {
		t.Fatalf("lost despite auto-renewal: %v", err)
	}
	if !l.ExpiresAt().After(first) {
		t.Errorf("ExpiresAt did not move: %v", first)
	}
	if n := p.f.Renews.Load(); n < 3 {
		t.Errorf("%d renewals in 3 TTLs, want about 9", n)
	}
	// Nobody else could take it meanwhile.
	_, err := p.manager(t, "o2").Acquire(ctxT(t), "job")
	wantNotAcquired(t, err)
	select {
	case ev := <-sub.Events():
		t.Errorf("unexpected loss event %+v", ev)
	default:
	}
}

// mAbandonedGrant: the caller gives up while its acquire is in flight; the
// grant that arrives later must be released, not left unowned.
func (s *suite) mAbandonedGrant(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	p.f.AcquireDelay.Store(int64(200 * time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := m.Acquire(ctx, "job", leasehold.WithTTL(time.Minute)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	p.f.AcquireDelay.Store(0)
	other := p.manager(t, "o2")
	eventually(t, "the abandoned grant to be released", func() bool {
		l, err := other.Acquire(ctxT(t), "job")
		return err == nil && l != nil
	})
	if len(m.Held()) != 0 {
		t.Errorf("Held() = %v", m.Held())
	}
}

// mAmbiguousAcquire: the backend granted but the answer was lost; the engine
// must release whatever it may hold before reporting the error.
func (s *suite) mAmbiguousAcquire(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	p.f.FailAfterAcquire.Store(true)
	_, err := m.Acquire(ctxT(t), "job", leasehold.WithTTL(time.Minute))
	if !errors.Is(err, ErrInjected) || errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatalf("err = %v, want the backend fault (not ErrNotAcquired)", err)
	}
	p.f.FailAfterAcquire.Store(false)
	// Released before the error was returned: free at once, not eventually.
	if _, err := p.manager(t, "o2").Acquire(ctxT(t), "job"); err != nil {
		t.Fatalf("the ambiguous grant was not released before the error was reported: %v", err)
	}
}

func (s *suite) mBackendFault(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job")
	p.f.FailRelease.Store(true)
	err := l.Release(ctxT(t))
	if !errors.Is(err, ErrInjected) {
		t.Errorf("Release = %v, want the backend fault", err)
	}
	if !errors.Is(l.Err(), leasehold.ErrReleased) {
		t.Errorf("handle after a failed release: %v, want ended with ErrReleased", l.Err())
	}
}

func (s *suite) mDo(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	ran := false
	err := m1.Do(ctxT(t), "job", func(ctx context.Context) error {
		ran = true
		if err := m2.Do(ctxT(t), "job", func(context.Context) error { return nil }); !errors.Is(err, leasehold.ErrNotAcquired) {
			t.Errorf("Do on a busy lease = %v, want ErrNotAcquired", err)
		}
		return ctx.Err()
	})
	if err != nil || !ran {
		t.Fatalf("Do = %v, ran %v", err, ran)
	}
	boom := errors.New("boom")
	if err := m1.Do(ctxT(t), "job", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Do = %v, want fn's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Do swallowed a panic")
			}
		}()
		_ = m1.Do(ctxT(t), "job", func(context.Context) error { panic("fn panics") })
	}()
	if len(m1.Held()) != 0 {
		t.Errorf("Held() after Do = %v", m1.Held())
	}
	mustAcquire(t, m2, "job") // released every time
}

func (s *suite) mDoLost(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	err := m.Do(ctxT(t), "job", func(ctx context.Context) error {
		p.f.FailRenew.Store(true)
		<-ctx.Done()
		return ctx.Err()
	}, leasehold.WithTTL(s.short))
	if !errors.Is(err, leasehold.ErrLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want fn's error and ErrLost", err)
	}
}

func (s *suite) mHeld(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	a := mustAcquire(t, m, "a", leasehold.WithMetadata("host=a"))
	mustAcquire(t, m, "b")
	held := m.Held()
	if len(held) != 2 || held[0].Name != "a" || held[0].Metadata != "host=a" || held[0].Token != a.Token() || held[0].Owner != "o1" || held[1].Name != "b" {
		t.Errorf("Held() = %+v", held)
	}
	if a.Name() != "a" || a.Owner() != "o1" {
		t.Errorf("Name/Owner = %q/%q", a.Name(), a.Owner())
	}
	if m.Provider() != p.raw.Info() {
		t.Errorf("Provider() = %+v, want %+v", m.Provider(), p.raw.Info())
	}
}

func (s *suite) mClose(t *testing.T) {
	p := s.pair(t)
	m, err := leasehold.New(p.b, leasehold.WithOwner("o1"), leasehold.WithKeyPrefix(p.prefix))
	if err != nil {
		t.Fatal(err)
	}
	other := p.manager(t, "o2")
	sub := m.Subscribe(8)
	var ls []*leasehold.Lease
	for i := range 3 {
		ls = append(ls, mustAcquire(t, m, fmt.Sprintf("l%d", i)))
	}
	mustAcquire(t, other, "busy")
	waiter := make(chan error, 1)
	go func() {
		_, err := m.Acquire(context.Background(), "busy", leasehold.WithWait(leasehold.WaitForever))
		waiter <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the waiter queue
	if err := m.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("waiter got %v, want ErrClosed", err)
	}
	for _, l := range ls {
		if !errors.Is(l.Err(), leasehold.ErrReleased) || !errors.Is(context.Cause(l.Context()), leasehold.ErrReleased) {
			t.Errorf("%s after Close: %v", l.Name(), l.Err())
		}
		select {
		case <-l.Lost():
			t.Errorf("%s: Close counted as a loss", l.Name())
		default:
		}
		if err := l.Release(ctxT(t)); err != nil {
			t.Errorf("Release after Close = %v", err)
		}
		if err := l.Renew(ctxT(t), 0); !errors.Is(err, leasehold.ErrClosed) {
			t.Errorf("Renew after Close = %v, want ErrClosed", err)
		}
		mustAcquire(t, other, l.Name()) // released on the backend
	}
	for ev := range sub.Events() {
		t.Errorf("LostEvent on Close: %+v", ev)
	}
	if _, err := m.Acquire(ctxT(t), "x"); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("Acquire after Close = %v", err)
	}
	if err := m.Do(ctxT(t), "x", func(context.Context) error { return nil }); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("Do after Close = %v", err)
	}
	if _, ok := <-m.Subscribe(1).Events(); ok {
		t.Error("Subscribe after Close delivered")
	}
	if err := m.Close(ctxT(t)); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// mBatchMixed: renewals batched together get their own results: the leases
// taken away behind the Manager's back are lost as rejected, the rest stay.
func (s *suite) mBatchMixed(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	sub := m.Subscribe(32)
	const n, stolen = 20, 5
	var ls []*leasehold.Lease
	for i := range n {
		// A long TTL, renewed often: no lease is lost for being slow.
		ls = append(ls, mustAcquire(t, m, fmt.Sprint("l", i), leasehold.WithTTL(time.Minute), leasehold.WithRenewEvery(100*time.Millisecond)))
	}
	ctx := ctxT(t)
	for _, l := range ls[:stolen] {
		key := p.prefix + l.Name()
		if err := p.raw.Release(ctx, backend.ReleaseRequest{Key: key, Owner: "o1", Attempt: p.f.AttemptOf(key), Token: l.Token()}); err != nil {
			t.Fatal(err)
		}
		if g, err := p.raw.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "thief", Attempt: "thief", TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("thief: %+v, %v", g, err)
		}
	}
	for _, l := range ls[:stolen] {
		waitClosed(t, "loss of a stolen lease", l.Lost(), patience)
		if !errors.Is(l.Err(), backend.ErrNotHeld) {
			t.Errorf("%s: %v, want rejected (ErrNotHeld)", l.Name(), l.Err())
		}
	}
	for range stolen {
		if ev := <-sub.Events(); ev.Reason != leasehold.ReasonRejected {
			t.Errorf("event %+v, want ReasonRejected", ev)
		}
	}
	// Another round of renewals for the rest, after the losses.
	marks := map[*leasehold.Lease]time.Time{}
	for _, l := range ls[stolen:] {
		marks[l] = l.ExpiresAt()
	}
	eventually(t, "a renewal of every remaining lease", func() bool {
		for l, at := range marks {
			if !l.ExpiresAt().After(at) && l.Err() == nil {
				return false
			}
		}
		return true
	})
	for _, l := range ls[stolen:] {
		if err := l.Err(); err != nil {
			t.Errorf("%s lost with its batch: %v", l.Name(), err)
		}
	}
	if p.f.RenewBatches.Load() == 0 {
		t.Error("no renewal went through a batch")
	}
}

// mBatchFailure: a failed batch fails closed for each lease by its own local
// deadline, not earlier and not later.
func (s *suite) mBatchFailure(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	ttls := []time.Duration{s.short, 2 * s.short, 4 * s.short}
	var ls []*leasehold.Lease
	for i, ttl := range ttls {
		ls = append(ls, mustAcquire(t, m, fmt.Sprint("l", i), leasehold.WithTTL(ttl)))
	}
	p.f.FailRenew.Store(true)
	failedAt := time.Now()
	for i, l := range ls {
		// Not earlier: a lease is never lost before its local deadline,
		// which is at least 0.9 TTL after the renewal last confirmed (and
		// at least half a TTL after the batches started failing).
		if l.Err() != nil && time.Since(failedAt) < ttls[i]/2 {
			t.Errorf("%s (TTL %v) lost %v after the batches started failing", l.Name(), ttls[i], time.Since(failedAt))
		}
		// Not later: the last renewal that could succeed was sent before
		// the batches started failing, so the local deadline falls less
		// than a TTL after that.
		failedClosedBy(t, l, failedAt.Add(ttls[i]))
		waitClosed(t, "loss", l.Lost(), patience)
	}
}

// mBatchStarvation: with tiny batches, every lease still gets renewed: none
// waits for a batch that never comes. (Long TTLs, so that a slow machine makes
// renewals late, never lost; starvation would leave some lease unrenewed.)
func (s *suite) mBatchStarvation(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1", leasehold.WithRenewBatching(4, 5*time.Millisecond))
	var ls []*leasehold.Lease
	for i := range 100 {
		ls = append(ls, mustAcquire(t, m, fmt.Sprint("l", i), leasehold.WithTTL(time.Minute), leasehold.WithRenewEvery(100*time.Millisecond)))
	}
	marks := map[*leasehold.Lease]time.Time{}
	for _, l := range ls {
		marks[l] = l.ExpiresAt()
	}
	deadline := time.Now().Add(30 * time.Second)
	for l, at := range marks {
		for !l.ExpiresAt().After(at) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never renewed in 30 s (renew period 100 ms, batches of 4)", l.Name())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := l.Err(); err != nil {
			t.Errorf("%s: %v", l.Name(), err)
		}
	}
}
