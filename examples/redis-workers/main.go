// Command redis-workers shows several OS processes sharing a set of named jobs
// through Redis: each job is run by exactly one process at a time, and every
// run prints its fencing token.
//
//	go -C examples run ./redis-workers                 # 3 workers, 4 jobs, 5 seconds
//	go -C examples run ./redis-workers -workers 5 -for 10s -addr 127.0.0.1:6379
//
// The program starts the worker processes itself (it runs its own executable
// again with -worker). Each worker loops over the jobs, takes any job that is
// free, "works" on it for a moment while holding the lease, and releases it.
// Every run writes its result through the job's fence (backend/redis's
// Fenced), which refuses a token lower than the last one written: the way a
// protected resource turns away a stale holder.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	lhredis "github.com/leasehold/leasehold/backend/redis"
)

func main() {
	var (
		addr    = flag.String("addr", envOr("LEASEHOLD_REDIS_ADDR", "127.0.0.1:6379"), "Redis host:port")
		workers = flag.Int("workers", 3, "number of worker processes")
		jobs    = flag.Int("jobs", 4, "number of named jobs")
		dur     = flag.Duration("for", 5*time.Second, "how long the workers run")
		worker  = flag.Int("worker", 0, "internal: run as worker number N")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *worker > 0 {
		if err := runWorker(ctx, *addr, *worker, *jobs, *dur); err != nil {
			log.Fatalf("worker %d: %v", *worker, err)
		}
		return
	}
	if err := runParent(ctx, *addr, *workers, *jobs, *dur); err != nil {
		log.Fatal(err)
	}
}

// runParent starts the workers as child processes and waits for them.
func runParent(ctx context.Context, addr string, workers, jobs int, dur time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var cmds []*exec.Cmd
	for i := 1; i <= workers; i++ {
		cmd := exec.CommandContext(ctx, self, "-worker", strconv.Itoa(i), "-addr", addr,
			"-jobs", strconv.Itoa(jobs), "-for", dur.String())
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds = append(cmds, cmd)
	}
	var errs []error
	for _, cmd := range cmds {
		errs = append(errs, cmd.Wait())
	}
	return errors.Join(errs...)
}

func runWorker(ctx context.Context, addr string, id, jobs int, dur time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	client := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	b, err := lhredis.New(client, lhredis.WithKeyPrefix("leasehold-example:"))
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := leasehold.New(b, leasehold.WithOwner(fmt.Sprintf("worker-%d/pid-%d", id, os.Getpid())))
	if err != nil {
		return err
	}
	defer m.Close(context.Background())
	fmt.Printf("worker %d (pid %d) started\n", id, os.Getpid())

	for n := 0; ctx.Err() == nil; n++ {
		job := fmt.Sprintf("job-%d", (n+id)%jobs)
		// A short wait: a busy job is skipped for the next one.
		l, err := m.Acquire(ctx, job, leasehold.WithTTL(2*time.Second), leasehold.WithWait(50*time.Millisecond))
		switch {
		case errors.Is(err, leasehold.ErrNotAcquired):
			continue
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		}
		werr := work(l.Context(), client, id, job, l.Token())
		if err := l.Release(context.Background()); err != nil {
			return err
		}
		if werr != nil && ctx.Err() == nil {
			return werr
		}
	}
	return nil
}

// work runs one job while the lease is held; ctx ends if the lease is lost.
// Its result goes to Redis through the job's fence, which refuses a token
// lower than the last one written: the write of a holder that lost the job
// while paused is turned away, whenever it comes.
func work(ctx context.Context, client *goredis.Client, id int, job string, token uint64) error {
	err := lhredis.Fenced(client, job).Set(ctx, token, "leasehold-example:result:"+job,
		fmt.Sprintf("run by worker %d", id), 0)
	verdict := "accepted"
	switch {
	case errors.Is(err, leasehold.ErrStaleToken):
		verdict = "REJECTED (" + err.Error() + ")"
	case err != nil:
		return err
	}
	fmt.Printf("worker %d runs %s with token %d: write %s\n", id, job, token, verdict)
	select { // the work itself
	case <-time.After(time.Duration(50+rand.IntN(150)) * time.Millisecond):
	case <-ctx.Done():
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
