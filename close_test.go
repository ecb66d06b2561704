package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

// TestCloseWithEndedContextOnMemory: the memory backend is called by the lease
// actors themselves (no backend actor). Close with an already ended context,
// while leases are held and Acquires race it, ends every handle as released,
// sends no LostEvent, closes the subscription, and hands out no live lease
// after it returned. (backendtest's Identity rows check the same through the
// backend actor on every backend.)
func TestCloseWithEndedContextOnMemory(t *testing.T) {
	store := memory.New()
	m, err := leasehold.New(store)
	if err != nil {
		t.Fatal(err)
	}
	sub := m.Subscribe(16)
	var held []*leasehold.Lease
	for i := range 3 {
		l, err := m.Acquire(context.Background(), fmt.Sprint("l", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	var (
		mu    sync.Mutex
		raced []*leasehold.Lease
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range 4 {
		wg.Go(func() {
			for n := range 10_000 {
				if n == 1 && i == 0 {
					close(start)
				}
				l, err := m.Acquire(context.Background(), fmt.Sprintf("r%d-%d", i, n))
				if err != nil {
					if !errors.Is(err, leasehold.ErrClosed) {
						t.Errorf("Acquire racing Close: %v", err)
					}
					return
				}
				mu.Lock()
				raced = append(raced, l)
				mu.Unlock()
			}
		})
	}
	<-start
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Close(ended); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v", err)
	}
	mu.Lock()
	for _, l := range append(held, raced...) {
		if l.Err() == nil {
			t.Errorf("%s: live after Close returned", l.Name())
		}
	}
	mu.Unlock()
	wg.Wait()
	for _, l := range append(held, raced...) {
		if err := l.Err(); !errors.Is(err, leasehold.ErrReleased) {
			t.Errorf("%s: %v, want ErrReleased", l.Name(), err)
		}
	}
	for ev := range sub.Events() {
		t.Errorf("LostEvent %+v", ev)
	}
	if _, err := m.Acquire(context.Background(), "after"); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
}
