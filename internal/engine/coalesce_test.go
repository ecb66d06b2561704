package engine

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/protocol"
)

// batchStore answers every acquire, alone or in a batch, with a grant whose
// token is the request's TTL in milliseconds, and records the size of each
// round trip; a round trip waits for gate first.
type batchStore struct {
	backend.Backend // not called beyond what is defined here
	gate            chan struct{}
	mu              sync.Mutex
	trips           []int
}

func (s *batchStore) Info() backend.Info { return backend.Info{Name: "batch", Batches: true} }

func (s *batchStore) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	s.round(1)
	return backend.Grant{Acquired: true, Token: uint64(r.TTL / time.Millisecond)}, nil
}

func (s *batchStore) Batch(ctx context.Context, calls []backend.Call) {
	s.round(len(calls))
	for i := range calls {
		calls[i].Grant = backend.Grant{Acquired: true, Token: uint64(calls[i].Acquire.TTL / time.Millisecond)}
	}
}

func (s *batchStore) round(n int) {
	<-s.gate
	s.mu.Lock()
	s.trips = append(s.trips, n)
	s.mu.Unlock()
}

// Calls that queue while every round trip is busy go in batches, each
// answered once with its own result, in the order they came.
func TestCoalescerAnswersEveryQueuedCallOnce(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	results := make(chan protocol.BackendResult, 1024)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if r, ok := c.Message().(*protocol.BackendResult); ok {
			results <- *r
		}
	}))
	store := &batchStore{gate: make(chan struct{})}
	cfg := &Config{Backend: store, Logger: slog.New(slog.DiscardHandler)}
	cfg.info = store.Info()
	var wg sync.WaitGroup
	a := newBackendActor(cfg, sys.Root, func(string) {}, func(backend.HandOff) {}, make(chan struct{}), &wg)
	defer a.cancel()
	q := newCoalescer(a)
	const calls = maxBatches + 2*maxBatch + 7
	for i := 1; i <= calls; i++ {
		q.add(&protocol.BackendCall{Seq: uint64(i), ReplyTo: pid, Ctx: context.Background(),
			Call: backend.Call{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: "k", TTL: time.Duration(i) * time.Millisecond}}})
	}
	close(store.gate)
	seen := make(map[uint64]bool)
	for range calls {
		select {
		case r := <-results:
			if r.Err != nil || r.Grant.Token != r.Seq || seen[r.Seq] {
				t.Fatalf("result %+v (seen before: %v)", r, seen[r.Seq])
			}
			seen[r.Seq] = true
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d calls answered", len(seen), calls)
		}
	}
	wg.Wait()
	store.mu.Lock()
	defer store.mu.Unlock()
	total, biggest := 0, 0
	for _, n := range store.trips {
		total += n
		biggest = max(biggest, n)
	}
	if total != calls || biggest > maxBatch || len(store.trips) >= calls {
		t.Fatalf("round trips %v: %d calls in all (want %d), none above %d, fewer trips than calls", store.trips, total, calls, maxBatch)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queued) != 0 || q.running != 0 {
		t.Fatalf("after: %d queued, %d running", len(q.queued), q.running)
	}
}
