package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

// The engine's own cost: acquire+release cycles through the actors on the
// memory backend (no I/O), against the floor of a mutex-guarded map doing the
// same bookkeeping. Run:
//
//	go test -run '^$' -bench 'Memory|MutexMap' -count 6 ./bench | benchstat -

var memNames = func() []string {
	ns := make([]string, benchNames)
	for i := range ns {
		ns[i] = "name-" + strconv.Itoa(i)
	}
	return ns
}()

func BenchmarkMemoryAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			m, err := leasehold.New(memory.New())
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			runCycles(b, g, func(ctx context.Context, name string) error {
				l, err := m.Acquire(ctx, name, leasehold.WithWait(leasehold.WaitForever))
				if err != nil {
					return err
				}
				return l.Release(ctx)
			})
		})
	}
}

func BenchmarkMutexMapAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			var mu sync.Mutex
			held := map[string]uint64{}
			var token uint64
			runCycles(b, g, func(ctx context.Context, name string) error {
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

// runCycles runs b.N cycles spread over goroutines, each cycling through the
// names from its own offset.
func runCycles(b *testing.B, goroutines int, cycle func(ctx context.Context, name string) error) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for g := range goroutines {
		wg.Go(func() {
			i := g * (benchNames / goroutines)
			for next.Add(1) <= int64(b.N) {
				if err := cycle(ctx, memNames[i%benchNames]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	}
	wg.Wait()
}
