package leasehold_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
)

var stressFor = flag.Duration("stress.duration", 2*time.Second, "how long each TestStress variant runs (make test: the default; longer by hand)")

// TestStress: many goroutines on few names, with random waits, cancels,
// explicit renewals and releases under tiny or ended contexts, and Managers
// closed with ended, short or long contexts and replaced, on the memory
// backend directly and through the backend actor (with injected faults).
// Invariants: never two live handles for one name at the same instant; no
// token is ever handed out twice for a name; every call returns; the store is
// empty once every Manager has closed and the TTLs of what could not be
// released have run out; goleak (TestMain).
func TestStress(t *testing.T) {
	t.Run("memory", func(t *testing.T) { stress(t, false) })
	t.Run("backend-actor-with-faults", func(t *testing.T) { stress(t, true) })
}

const (
	stressNames    = 3
	stressManagers = 3
	stressWorkers  = 24
	stressMaxTTL   = 300 * time.Millisecond
)

// tracker checks the invariants as handles come and go.
type tracker struct {
	t      *testing.T
	store  *memory.Backend // for its view of a name when a check fails
	mu     sync.Mutex
	live   map[string][]*leasehold.Lease
	tokens map[string]map[uint64]bool
	grants atomic.Int64
}

// granted registers a new handle: no other handle for its name may still be
// live, and its token must be new.
func (tr *tracker) granted(l *leasehold.Lease) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.grants.Add(1)
	name := l.Name()
	kept := tr.live[name][:0]
	for _, o := range tr.live[name] {
		if o.Err() == nil {
			if l.Err() == nil {
				h, held, err := tr.store.Inspect(context.Background(), name)
				tr.t.Errorf("%s: tokens %d (%s, expires at %v) and %d (%s, expires at %v) both live; the store holds %+v (held %v, err %v)",
					name, o.Token(), o.Owner(), o.ExpiresAt(), l.Token(), l.Owner(), l.ExpiresAt(), h, held, err)
			}
			kept = append(kept, o)
		}
	}
	tr.live[name] = append(kept, l)
	if tr.tokens[name] == nil {
		tr.tokens[name] = map[uint64]bool{}
	}
	if tr.tokens[name][l.Token()] {
		tr.t.Errorf("%s: token %d handed out twice", name, l.Token())
	}
	tr.tokens[name][l.Token()] = true
}

func stress(t *testing.T, viaActor bool) {
	// The store's clock is the system's until the end, when the test moves
	// it past every TTL instead of waiting for them to run out.
	var skip atomic.Int64
	store := memory.New(memory.WithClock(func() time.Time { return time.Now().Add(time.Duration(skip.Load())) }))
	var b backend.Backend = store
	var faults *backendtest.Faulty
	if viaActor {
		faults, b = backendtest.Wrap(store)
	}
	tr := &tracker{t: t, store: store, live: map[string][]*leasehold.Lease{}, tokens: map[string]map[uint64]bool{}}

	var slots [stressManagers]atomic.Pointer[leasehold.Manager]
	var closers sync.WaitGroup
	newM := func(i int) *leasehold.Manager {
		m, err := leasehold.New(b, leasehold.WithOwner(fmt.Sprint("m", i%2))) // owners shared on purpose
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for i := range slots {
		slots[i].Store(newM(i))
	}
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for w := range stressWorkers {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for {
				select {
				case <-stop:
					return
				default:
				}
				stressOp(rng, slots[rng.IntN(stressManagers)].Load(), fmt.Sprint("n", rng.IntN(stressNames)), tr)
			}
		})
	}
	// Replace Managers now and then, closing them with ended, short or long
	// contexts while the workers use them.
	workers.Go(func() {
		rng := rand.New(rand.NewPCG(7, 7))
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+rng.IntN(60)) * time.Millisecond):
			}
			i, how := rng.IntN(stressManagers), rng.IntN(3)
			old := slots[i].Swap(newM(i + n))
			closers.Go(func() { closeSomehow(t, old, how) })
		}
	})
	if faults != nil {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(9, 9))
			for {
				select {
				case <-stop:
					faults.FailRelease.Store(false)
					faults.FailAfterAcquire.Store(false)
					faults.FailRenew.Store(false)
					return
				case <-time.After(time.Duration(5+rng.IntN(30)) * time.Millisecond):
				}
				faults.FailRelease.Store(rng.IntN(4) == 0)
				faults.FailAfterAcquire.Store(rng.IntN(8) == 0)
				faults.FailRenew.Store(rng.IntN(8) == 0)
			}
		})
	}

	time.Sleep(*stressFor) // the test's own length, not a synchronisation
	close(stop)
	returned := make(chan struct{})
	go func() { workers.Wait(); closers.Wait(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("calls did not return:\n%s", buf[:runtime.Stack(buf, true)])
	}
	for i := range slots {
		closeSomehow(t, slots[i].Load(), 2)
	}
	// Close with an ended context leaves its releases to the store's TTL.
	// Every Manager has closed, so nothing calls the store any more: move
	// its clock past the longest TTL.
	skip.Store(int64(stressMaxTTL))
	if n := store.Len(); n != 0 {
		t.Fatalf("the store still holds %d leases after every Manager closed and every TTL ran out", n)
	}
	if tr.grants.Load() == 0 {
		t.Fatal("no lease was ever granted: the test tested nothing")
	}
	t.Logf("%d grants", tr.grants.Load())
}

// stressOp is one user's turn: acquire somehow, maybe renew, release somehow.
func stressOp(rng *rand.Rand, m *leasehold.Manager, name string, tr *tracker) {
	opts := []leasehold.AcquireOption{leasehold.WithTTL(time.Duration(30+rng.IntN(270)) * time.Millisecond)}
	switch rng.IntN(4) {
	case 0: // one attempt
	case 1:
		opts = append(opts, leasehold.WithWait(time.Duration(rng.IntN(20))*time.Millisecond))
	default:
		opts = append(opts, leasehold.WithWait(leasehold.WaitForever))
	}
	if rng.IntN(4) == 0 {
		opts = append(opts, leasehold.WithoutAutoRenew())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(50))*time.Millisecond)
	defer cancel()
	l, err := m.Acquire(ctx, name, opts...)
	if err != nil {
		if !errors.Is(err, leasehold.ErrNotAcquired) && !errors.Is(err, leasehold.ErrClosed) &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, backendtest.ErrInjected) &&
			!errors.Is(err, leasehold.ErrTTLTooShort) { // a 30 ms TTL on a loaded machine
			tr.t.Errorf("Acquire: unexpected error %v", err)
		}
		return
	}
	tr.granted(l)
	select { // the work, which stops when the lease is lost, as a user's must
	case <-time.After(time.Duration(rng.IntN(3000)) * time.Microsecond):
	case <-l.Lost():
	}
	tiny := func() (context.Context, context.CancelFunc) {
		switch rng.IntN(3) {
		case 0:
			c, cancel := context.WithCancel(context.Background())
			cancel()
			return c, func() {}
		case 1:
			return context.WithTimeout(context.Background(), time.Millisecond)
		}
		return context.WithTimeout(context.Background(), time.Second)
	}
	if rng.IntN(3) == 0 {
		rctx, cancel := tiny()
		_ = l.Renew(rctx, 0)
		cancel()
	}
	if rng.IntN(8) == 0 {
		return // walk away: the lease lives until its Manager closes or it expires
	}
	rctx, cancel2 := tiny()
	_ = l.Release(rctx)
	cancel2()
	if l.Err() == nil {
		tr.t.Errorf("%s: live after Release returned", name)
	}
}

// closeSomehow closes m with an ended (0), short (1) or long (2) context.
func closeSomehow(t *testing.T, m *leasehold.Manager, how int) {
	var ctx context.Context
	var cancel context.CancelFunc
	switch how {
	case 0:
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
	case 1:
		ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	default:
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	}
	defer cancel()
	if err := m.Close(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: %v", err)
	}
	if how == 2 && ctx.Err() != nil {
		t.Errorf("Close with a long context took %v", 20*time.Second)
	}
}
