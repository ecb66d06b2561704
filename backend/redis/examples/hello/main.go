// Command hello is the README's complete program on Redis (a server on
// 127.0.0.1:6379); start several at once and each runs the work in turn:
// go -C backend/redis run ./examples/hello
package main

import (
	"context"
	"errors"
	"log"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/redis"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"}) // or a Sentinel or Cluster client
	defer client.Close()
	b, err := redis.New(client)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := leasehold.New(b) // a unique owner id per process by default
	if err != nil {
		return err
	}
	defer m.Close(ctx)

	err = m.Do(ctx, "invoice-run", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		log.Printf("running %s with fencing token %d", l.Name(), l.Token())
		return nil
	}, leasehold.WithTTL(15*time.Second), leasehold.WithWait(time.Minute))
	if errors.Is(err, leasehold.ErrNotAcquired) {
		log.Print("another process held invoice-run for the whole minute")
		return nil
	}
	return err
}
