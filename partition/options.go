package partition

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// Defaults of the options.
const (
	// DefaultTTL is the TTL of the membership and item leases: how long the
	// group waits for a member that died before taking its items over.
	DefaultTTL = leasehold.DefaultTTL
	// DefaultRebalanceEvery is how often a member looks at the group (who is
	// live, which items are free) and moves towards its share; a quarter of
	// it while the member is below its share.
	DefaultRebalanceEvery = 5 * time.Second
	// DefaultGrace bounds how long handing an item back waits for its
	// OnAssigned to return before the lease is left to expire.
	DefaultGrace = 30 * time.Second
)

// Option configures Join. Options are checked before anything is acquired.
type Option func(*config)

type config struct {
	ttl       time.Duration
	rebalance time.Duration
	grace     time.Duration
	meters    metric.MeterProvider
	logger    *slog.Logger
	err       error
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithTTL sets the TTL of the member's leases (its membership and every item
// it owns; renewed every TTL/3). Default DefaultTTL; within [1ms,
// leasehold.MaxTTL], and the backend's own limits (on etcd, whole seconds).
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond || d > leasehold.MaxTTL {
			c.fail(fmt.Errorf("%w: partition.WithTTL(%v): must be within [1ms, %v]", leasehold.ErrInvalidOption, d, leasehold.MaxTTL))
		}
		c.ttl = d
	}
}

// WithRebalanceEvery sets how often the member looks at the group and moves
// towards its share. A join is noticed within one period; a dead member's
// items are taken within its TTL and one period. After it joins, and after it
// sees the members change, a member settles: a few rounds at most 250ms
// apart, so that members starting together share the items at once and a
// joiner gets its share soon after the others notice it. Each look is one
// or two List calls on the store. Default DefaultRebalanceEvery; positive.
func WithRebalanceEvery(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("%w: partition.WithRebalanceEvery(%v): must be positive", leasehold.ErrInvalidOption, d))
		}
		c.rebalance = d
	}
}

// WithGrace bounds how long handing an item back (for the fair share, or on
// leaving) waits for its OnAssigned to return while the lease stays renewed.
// After it the lease's renewals stop, and it ends at its local deadline
// instead of being released. Default DefaultGrace; positive.
func WithGrace(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("%w: partition.WithGrace(%v): must be positive", leasehold.ErrInvalidOption, d))
		}
		c.grace = d
	}
}

// WithMeterProvider sets where the member's metrics go, through the
// OpenTelemetry metric API. Default: the global provider
// (otel.GetMeterProvider), a no-op unless the application installs one.
//
// The instruments (meter "github.com/leasehold/leasehold/partition"), each
// with the attribute leasehold.partition.group:
//
//	leasehold.partition.items.owned     up-down counter  items this member holds now (handing back included)
//	leasehold.partition.moves           counter          leasehold.partition.move = taken | handed_back | lost | left
//	leasehold.partition.grace.exceeded  counter          hand-backs whose callback outlived the grace
//
// No instrument carries an item: items are many, and a time series per item
// would grow with them. Member.Owned answers per-item questions.
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(c *config) {
		if p == nil {
			c.fail(fmt.Errorf("%w: partition.WithMeterProvider(nil)", leasehold.ErrInvalidOption))
		}
		c.meters = p
	}
}

// WithLogger sets where the member logs (moves at Debug, what it cannot do
// at Warn). Default: nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

func newConfig(opts []Option) (config, error) {
	c := config{ttl: DefaultTTL, rebalance: DefaultRebalanceEvery, grace: DefaultGrace, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.meters == nil {
		c.meters = otel.GetMeterProvider()
	}
	return c, c.err
}
