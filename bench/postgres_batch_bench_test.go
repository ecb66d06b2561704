package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// BenchmarkPostgresBatch measures what Backend.Batch saves on PostgreSQL:
// size acquires of distinct names then their releases, made as 2*size single
// calls (one round trip each) or as two Batch calls (one round trip each).
// One op is one acquire+release of one name.
func BenchmarkPostgresBatch(b *testing.B) {
	for _, size := range []int{1, 16} {
		for _, batched := range []bool{false, true} {
			mode := "single"
			if batched {
				mode = "batch"
			}
			b.Run(mode+"/size="+strconv.Itoa(size), func(b *testing.B) {
				be := newPGBench(b).backend(b)
				ctx := context.Background()
				acq := make([]backend.Call, size)
				rel := make([]backend.Call, size)
				b.ReportAllocs()
				b.ResetTimer()
				for n := 0; n < b.N; n += size {
					for i := range acq {
						acq[i] = backend.Call{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{
							Key: "job-" + strconv.Itoa(i), Owner: "bench", Attempt: "bench-" + strconv.Itoa(n), TTL: 30 * time.Second}}
					}
					if batched {
						be.Batch(ctx, acq)
					} else {
						for i := range acq {
							acq[i].Grant, acq[i].Err = be.Acquire(ctx, acq[i].Acquire)
						}
					}
					for i, c := range acq {
						if c.Err != nil || !c.Grant.Acquired {
							b.Fatalf("acquire %d: %+v, %v", i, c.Grant, c.Err)
						}
						r := c.Acquire
						rel[i] = backend.Call{Op: backend.OpRelease, Release: backend.ReleaseRequest{Key: r.Key, Owner: r.Owner, Attempt: r.Attempt, Token: c.Grant.Token}}
					}
					if batched {
						be.Batch(ctx, rel)
					} else {
						for i := range rel {
							rel[i].Err = be.Release(ctx, rel[i].Release)
						}
					}
					for i, c := range rel {
						if c.Err != nil {
							b.Fatalf("release %d: %v", i, c.Err)
						}
					}
				}
			})
		}
	}
}
