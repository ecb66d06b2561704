package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/roundtrip"
)

// ErrClosed is returned (wrapped) by every call made after Close.
var ErrClosed = errors.New("redis: backend closed")

// Backend is a backend.Backend on Redis, with a waiter queue per name, release
// announcements, hand-off notices, batches, and shards on Cluster. It is safe
// for concurrent use.
type Backend struct {
	client goredis.UniversalClient
	cfg    config

	// The scripts' arguments that follow from the options, made once:
	// graceArg is the restart grace in milliseconds, channelArg the release
	// channel and handOffArg the prefix of the hand-off channels ("" both
	// when notifications are off).
	graceArg any
	// forgetArg is the forget delay in milliseconds (WithForgetAfter).
	forgetArg  any
	channelArg string
	handOffArg string

	// closing ends every running WatchReleases, and the idle I/O goroutines
	// of trips, when Close is called.
	closing context.Context
	close   context.CancelFunc
	once    sync.Once
	// trips runs every call's round trips (roundTrip).
	trips *roundtrip.Runner
	// slotMap says that a ClusterClient has its slot map, so that Shard can
	// read it without waiting for it to load.
	slotMap atomic.Bool
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend that keeps its leases in the Redis deployment behind
// client: a *goredis.Client (single node, or Sentinel through
// goredis.NewFailoverClient) or a *goredis.ClusterClient; any other client is
// refused with ErrInvalidOption (a Ring moves a down shard's keys to the
// others, where a second holder could take a name). The client stays the
// caller's: Close does not close it.
//
// New checks that no server may evict leases: it reads maxmemory-policy with
// CONFIG GET (on every master of a Cluster) within 5 seconds, and fails with
// an error wrapping ErrEvictionPolicy unless it is noeviction, or with the
// fault when a server cannot be reached. WithEvictionAllowed skips the check,
// and then New makes no network call. NewContext is New with the caller's
// context for the check.
func New(client goredis.UniversalClient, opts ...Option) (*Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), policyCheckTimeout)
	defer cancel()
	return NewContext(ctx, client, opts...)
}

// NewContext is New, with ctx bounding its check of the servers'
// maxmemory-policy instead of New's 5 seconds.
func NewContext(ctx context.Context, client goredis.UniversalClient, opts ...Option) (*Backend, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if strings.ContainsAny(cfg.prefix, "{}") {
		return nil, fmt.Errorf("%w: key prefix %q contains a brace, which would break the hash tag", ErrInvalidOption, cfg.prefix)
	}
	if cfg.replicas < 0 || (cfg.replicas > 0 && cfg.confirmTimeout <= 0) {
		return nil, fmt.Errorf("%w: replica confirmation needs replicas >= 0 and a positive timeout, got %d and %v",
			ErrInvalidOption, cfg.replicas, cfg.confirmTimeout)
	}
	switch client.(type) {
	case *goredis.Client, *goredis.ClusterClient:
	default:
		// A Ring, above all: when a shard is down it moves that shard's keys
		// to the others, where another Manager can acquire a name its
		// holder still holds; and it loads scripts on one shard only.
		return nil, fmt.Errorf("%w: the client must be a *redis.Client (one server, or Sentinel through NewFailoverClient) or a *redis.ClusterClient, not %T",
			ErrInvalidOption, client)
	}
	if cfg.restartGrace < 0 {
		return nil, fmt.Errorf("%w: negative restart grace %v", ErrInvalidOption, cfg.restartGrace)
	}
	if cfg.forgetAfter < 0 {
		return nil, fmt.Errorf("%w: negative forget delay %v", ErrInvalidOption, cfg.forgetAfter)
	}
	b := &Backend{client: client, cfg: cfg, graceArg: graceMillis(cfg.restartGrace), forgetArg: graceMillis(cfg.forgetAfter)}
	if cfg.notify {
		b.channelArg = b.Channel()
		b.handOffArg = b.handOffPrefix()
	}
	b.closing, b.close = context.WithCancel(context.Background())
	b.trips = roundtrip.New(b.closing.Done())
	if !cfg.allowEviction {
		if err := b.checkEviction(ctx); err != nil {
			b.close()
			return nil, err
		}
	}
	return b, nil
}

// Info reports "redis", shared across processes, with batches, with a waiter
// queue unless WithWaiterQueue(false) turned it off, with release
// announcements and hand-off notices unless WithReleaseNotifications(false)
// turned them off, Sharded on Cluster, and MaxLimit backend.MaxLimit (names
// with up to 1024 holders, WithLimit).
func (b *Backend) Info() backend.Info {
	_, cluster := b.client.(*goredis.ClusterClient)
	return backend.Info{Name: "redis", ProcessLocal: false, Queue: b.cfg.queue, Batches: true,
		AnnouncesReleases: b.cfg.notify, HandOffNotices: b.cfg.notify, Sharded: cluster,
		MaxLimit: backend.MaxLimit}
}

// Close ends every running WatchReleases and the backend's idle I/O
// goroutines, and makes later calls fail with ErrClosed. It leaves the leases
// and the client alone. It is idempotent.
func (b *Backend) Close() error {
	b.once.Do(b.close)
	return nil
}

// Shard names the shard of key (Info says Sharded on Cluster): the address of the master
// that serves key's slot in the client's slot map, so that a master that
// stops answering holds back only the calls on its own slots; "" on one
// server or Sentinel (one shard), and on Cluster until the slot map is
// loaded (New's policy check and the first renewal batch load it), since
// loading it would wait on the network.
func (b *Backend) Shard(key string) string {
	cc, ok := b.client.(*goredis.ClusterClient)
	if !ok || !b.slotMap.Load() {
		return ""
	}
	node, err := cc.MasterForKey(context.Background(), b.LeaseKey(key)) // a loaded map: no I/O
	if err != nil {
		return ""
	}
	return node.Options().Addr
}

func (b *Backend) closed() error {
	if b.closing.Err() != nil {
		return ErrClosed
	}
	return nil
}
