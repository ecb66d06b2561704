package redis_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/redis"
	goredis "github.com/redis/go-redis/v9"
)

// Two owners, as two processes would be, share a name through Redis. It runs
// against the Redis at $LEASEHOLD_REDIS_ADDR (default 127.0.0.1:6379).
func Example() {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: cmp.Or(os.Getenv("LEASEHOLD_REDIS_ADDR"), "127.0.0.1:6379")})
	defer client.Close()
	// One Backend per client; the prefix keeps these keys apart from others'.
	store, err := redis.New(client, redis.WithKeyPrefix("leasehold-example:"))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	a, err := leasehold.New(store, leasehold.WithOwner("worker-a"))
	if err != nil {
		panic(err)
	}
	defer a.Close(ctx)
	b, err := leasehold.New(store, leasehold.WithOwner("worker-b"))
	if err != nil {
		panic(err)
	}
	defer b.Close(ctx)

	lease, err := a.Acquire(ctx, "nightly-report", leasehold.WithTTL(10*time.Second), leasehold.WithWait(30*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println(lease.Owner(), "holds", lease.Name())
	_, err = b.Acquire(ctx, "nightly-report") // one attempt, no wait
	fmt.Println("worker-b turned away:", errors.Is(err, leasehold.ErrNotAcquired))
	if err := lease.Release(ctx); err != nil {
		panic(err)
	}

	// worker-b waits for the name; the release notification wakes it.
	err = b.Do(ctx, "nightly-report", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		fmt.Println(l.Owner(), "holds", l.Name(), "with a higher token:", l.Token() > lease.Token())
		return nil // ctx is cancelled if the lease is lost meanwhile
	}, leasehold.WithTTL(10*time.Second), leasehold.WithWait(30*time.Second))
	fmt.Println("done:", err)
	// Output:
	// worker-a holds nightly-report
	// worker-b turned away: true
	// worker-b holds nightly-report with a higher token: true
	// done: <nil>
}
