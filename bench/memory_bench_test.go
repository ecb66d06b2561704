package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
)

// The engine's own cost: acquire+release cycles through the actors on the
// memory backend (no I/O), against the floor of a mutex-guarded map doing the
// same bookkeeping. Run:
//
//	go test -run '^$' -bench 'MemoryAcquireRelease|MutexMapAcquireRelease' -count 6 ./bench | benchstat -

func BenchmarkMemoryAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			benchLeasehold(b, memory.New(), g, leasehold.WithWait(leasehold.WaitForever))
		})
	}
}

func BenchmarkMutexMapAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			var mu sync.Mutex
			held := map[string]uint64{}
			var token uint64
			runOps(b, g, func(name string) error {
				for {
					mu.Lock()
					if _, busy := held[name]; !busy {
						token++
						held[name] = token
						mu.Unlock()
						break
					}
					mu.Unlock()
				}
				mu.Lock()
				delete(held, name)
				mu.Unlock()
				return nil
			})
		})
	}
}

// benchLeasehold runs acquire+release cycles through a Manager on be (closed
// afterwards with the Manager); a name another goroutine holds counts as done.
func benchLeasehold(b *testing.B, be backend.Backend, goroutines int, opts ...leasehold.AcquireOption) {
	m, err := leasehold.New(be)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	ctx := context.Background()
	runOps(b, goroutines, func(name string) error {
		l, err := m.Acquire(ctx, name, opts...)
		if errors.Is(err, leasehold.ErrNotAcquired) {
			return nil
		}
		if err != nil {
			return err
		}
		return l.Release(ctx)
	})
}
