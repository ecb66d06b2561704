package redis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/redis"
	goredis "github.com/redis/go-redis/v9"
)

// The Go block of docs/backends/redis.md, verbatim between the markers
// (readme_test.go in the root package checks it). It runs against the Redis
// at 127.0.0.1:6379, the address the block names; it acquires nothing (replica confirmation
// needs a replica, which the local server may not have).
func Example_readme() {
	ctx := context.Background()

	// docs/backends/redis.md
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	b, err := redis.NewContext(ctx, client, // *Client, NewFailoverClient (Sentinel) or *ClusterClient
		redis.WithKeyPrefix("myapp:"),                          // default "leasehold:"
		redis.WithReplicaConfirmation(1, 200*time.Millisecond), // optional
		redis.WithRestartGrace(30*time.Second))                 // optional: your longest TTL
	m, err := leasehold.New(b)
	// end docs
	if err != nil {
		panic(err)
	}
	defer client.Close()
	defer b.Close()
	defer m.Close(ctx)
	fmt.Println("backend:", m.BackendInfo().Name)
	// Output: backend: redis
}
