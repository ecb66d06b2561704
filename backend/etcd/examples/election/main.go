// Command election elects one leader among processes through an etcd
// cluster, with the election package on an etcd-backed Manager. Start it in
// several terminals: one process leads, printing its fencing token (an etcd
// revision, so it keeps increasing through every leader change of etcd
// itself); the others print who leads and wait. Stop the leader (Ctrl-C) and
// another takes over at once (the release deletes the key, which every
// campaign watches); kill it (kill -9) and another takes over when its etcd
// lease ends, TTL seconds later.
//
//	go -C backend/etcd run ./examples/election -endpoints 127.0.0.1:2379 -ttl 5s
//
// Endpoints come from -endpoints or LEASEHOLD_ETCD_ENDPOINTS (comma
// separated); give every member, so that the client fails over.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/etcd"
	"github.com/leasehold/leasehold/election"
)

type config struct {
	endpoints []string
	name      string
	owner     string
	ttl       time.Duration
	minTTL    time.Duration
	work      time.Duration
}

func main() {
	host, _ := os.Hostname()
	c := config{}
	var endpoints string
	flag.StringVar(&endpoints, "endpoints", envOr("LEASEHOLD_ETCD_ENDPOINTS", "127.0.0.1:2379"), "etcd client endpoints, comma separated")
	flag.StringVar(&c.name, "name", "scheduler", "what is being led (the lease name)")
	flag.StringVar(&c.owner, "owner", fmt.Sprintf("%s:%d", host, os.Getpid()), "this process's identity")
	flag.DurationVar(&c.ttl, "ttl", 5*time.Second, "leadership TTL, whole seconds: how long a crashed leader blocks the others")
	flag.DurationVar(&c.minTTL, "min-ttl", etcd.DefaultMinTTL, "the cluster's shortest lease: ceil(1.5 × election timeout), whole seconds")
	flag.DurationVar(&c.work, "work", time.Second, "duration of one unit of the leader's work")
	flag.Parse()
	c.endpoints = strings.Split(endpoints, ",")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "election:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// run campaigns until ctx ends.
func run(ctx context.Context, c config, out io.Writer) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	b, err := etcd.New(cli, etcd.WithMinTTL(c.minTTL))
	if err != nil {
		return err
	}
	m, err := leasehold.New(b, leasehold.WithOwner(c.owner))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(cctx)
	}()
	fmt.Fprintf(out, "%s: campaigning for %q on %s\n", c.owner, c.name, strings.Join(c.endpoints, ","))
	return election.Run(ctx, m, c.name, election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			l, _ := leasehold.LeaseFrom(ctx)
			fmt.Fprintf(out, "%s: LEADER of %q with fencing token %d\n", c.owner, c.name, l.Token())
			lead(ctx, l, c, out)
		},
		OnStoppedLeading: func() { fmt.Fprintf(out, "%s: no longer leading\n", c.owner) },
		OnNewLeader: func(id string) {
			if id != c.owner {
				fmt.Fprintf(out, "%s: %s leads\n", c.owner, id)
			}
		},
	}, leasehold.WithTTL(c.ttl))
}

// lead works in units until leadership ends, stamping each with the token:
// a store that remembers the highest token it has seen refuses a deposed
// leader's late writes.
func lead(ctx context.Context, l *leasehold.Lease, c config, out io.Writer) {
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), leasehold.ErrLost) {
				fmt.Fprintf(out, "%s: LOST leadership (token %d)\n", c.owner, l.Token())
			}
			return
		case <-time.After(c.work):
			fmt.Fprintf(out, "%s: work unit %d under token %d\n", c.owner, n, l.Token())
		}
	}
}
