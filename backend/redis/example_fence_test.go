package redis_test

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/redis"
)

// The Redis guard of docs/fencing-tokens.md, verbatim between the markers
// (readme_test.go in the root package checks it). It runs against the
// Redis at 127.0.0.1:6379.
func Example_fence() {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	b, err := redis.NewContext(ctx, client, redis.WithKeyPrefix("leasehold-example:"))
	if err != nil {
		panic(err)
	}
	defer b.Close()
	m, _ := leasehold.New(b)
	defer m.Close(ctx)
	buildReport := func() string { return "42 invoices" }
	// docs/fencing-tokens.md: Redis
	err = m.Do(ctx, "daily-report", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		report := buildReport()
		// On Redis Cluster the key carries the resource's hash tag, so that
		// it shares a slot with the fence key, redis.FenceKey("daily-report").
		return redis.Fenced(client, "daily-report").Set(ctx, l.Token(), "{daily-report}:latest", report, 24*time.Hour)
	}, leasehold.WithWait(time.Minute))
	// end docs
	fmt.Println("done:", err, client.Get(ctx, "{daily-report}:latest").Val())
	// Output:
	// done: <nil> 42 invoices
}
