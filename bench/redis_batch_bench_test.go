package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	lhredis "github.com/leasehold/leasehold/backend/redis"
)

// BenchmarkRedisBackendBatchAcquireRelease is the work of
// BenchmarkRedisBackendAcquireRelease (one acquire and one release per name,
// b.N names in all) done through Backend.Batch: the acquires of size names
// in one round trip, then their releases in another, from one goroutine. At
// size 1 it costs what the single calls cost (plus the pipeline); above, the
// round trips are shared, as the engine shares them when calls are ready
// together.
func BenchmarkRedisBackendBatchAcquireRelease(b *testing.B) {
	for _, size := range []int{1, 16, 64} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			c := benchClient(b)
			be, err := lhredis.New(c, lhredis.WithKeyPrefix("lhbench-batch:"))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			names := make([]string, benchNames)
			for i := range names {
				names[i] = "job-" + strconv.Itoa(i)
			}
			ctx := context.Background()
			calls := make([]backend.Call, size)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += size {
				n := min(size, b.N-done)
				for i := range n {
					calls[i] = backend.Call{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{
						Key: names[(done+i)%benchNames], Owner: "bench", Attempt: "bench", TTL: 30 * time.Second}}
				}
				be.Batch(ctx, calls[:n])
				for i := range n {
					a := calls[i]
					if a.Err != nil || !a.Grant.Acquired {
						b.Fatal(batchFailure(a))
					}
					calls[i] = backend.Call{Op: backend.OpRelease, Release: backend.ReleaseRequest{
						Key: a.Acquire.Key, Owner: "bench", Attempt: "bench", Token: a.Grant.Token}}
				}
				be.Batch(ctx, calls[:n])
				for i := range n {
					if calls[i].Err != nil {
						b.Fatal(batchFailure(calls[i]))
					}
				}
			}
		})
	}
}

func batchFailure(c backend.Call) string {
	return fmt.Sprintf("%v: %+v, %v", c.Op, c.Grant, c.Err)
}
