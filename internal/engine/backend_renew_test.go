package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/clock/clocktest"
)

// A renewal whose local deadline passed while it waited for a worker is
// answered at once as failed and never sent: its holding is lost whatever the
// store says, and under overload the round trip belongs to the leases that
// can still be kept. (Such renewals used to be sent, and their answers, all
// too late, kept the store busy while the next ones expired in turn.)
func TestExpiredRenewalsAreNotSent(t *testing.T) {
	clock := clocktest.New()
	var sent atomic.Int64
	store := backend.Wrap(memory.New(), backend.Middleware{Call: func(ctx context.Context, calls []backend.Call, next func(context.Context, []backend.Call)) {
		sent.Add(int64(len(calls)))
		next(ctx, calls)
	}})
	cfg := &Config{Backend: store, Logger: slog.New(slog.DiscardHandler), Clock: clock}
	cfg.info = store.Info()
	var wg sync.WaitGroup
	a := newBackendActor(cfg, nil, func(string) {}, func(backend.HandOff) {}, make(chan struct{}), &wg)
	defer wg.Wait()
	defer a.cancel()
	type answer struct {
		seqs []uint64
		err  error
	}
	answers := make(chan answer, 2)
	a.renewed = func(batch []sentRenewal, _ []backend.RenewResult, err error) {
		var seqs []uint64
		for _, s := range batch {
			seqs = append(seqs, s.Seq)
		}
		answers <- answer{seqs, err}
	}
	req := backend.RenewRequest{Key: "k", Owner: "o", Attempt: "a.1", Token: 1, TTL: time.Minute}
	a.renewGroup([]sentRenewal{
		{Seq: 1, Renew: req, Deadline: clock.Now().Add(-time.Millisecond)},
		{Seq: 2, Renew: req, Deadline: clock.Now().Add(time.Minute)},
	})
	for range 2 {
		select {
		case got := <-answers:
			switch {
			case len(got.seqs) == 1 && got.seqs[0] == 1:
				if !errors.Is(got.err, context.DeadlineExceeded) {
					t.Errorf("expired renewal answered %v, want context.DeadlineExceeded", got.err)
				}
			case len(got.seqs) == 1 && got.seqs[0] == 2:
			default:
				t.Errorf("answered %v together, want 1 and 2 apart", got.seqs)
			}
		case <-time.After(30 * time.Second): // both come at once
			t.Fatal("a renewal was never answered")
		}
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("%d renewals sent to the store, want 1 (the live one)", n)
	}
}
