package leasehold

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/engine"
	"github.com/leasehold/leasehold/internal/lease"
	"go.opentelemetry.io/otel/metric"
)

// Option configures a Manager.
type Option func(*managerConfig)

type managerConfig struct {
	owner      string
	logger     *slog.Logger
	prefix     string
	normalizer func(string) (string, error)
	system     *actor.ActorSystem
	batchSize  int
	batchDelay time.Duration
	meters     metric.MeterProvider
	pickup     time.Duration
	err        error
}

// WithOwner sets the owner identity this Manager holds leases as. It must be
// unique among every process sharing a backend. Default:
// "<hostname>:<pid>:<8 random hex digits>".
func WithOwner(id string) Option {
	return func(c *managerConfig) {
		if err := backend.CheckText("owner", id); err != nil {
			c.fail(fmt.Errorf("%w: WithOwner(%q): %w", ErrInvalidOption, id, err))
		}
		c.owner = id
	}
}

// WithLogger sets where the Manager (and protoactor under it) logs. Default:
// nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *managerConfig) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithKeyPrefix prepends prefix to every lease name to form the backend key,
// so that several applications can share one backend. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return func(c *managerConfig) { c.prefix = prefix }
}

// WithKeyNormalizer sets the function that turns a lease name into its backend
// key, replacing the prefix logic (e.g. case folding, hashing long names). It
// must be deterministic. Its errors, and keys it returns that are not valid
// names, fail Acquire with ErrInvalidName before any backend call.
func WithKeyNormalizer(fn func(name string) (string, error)) Option {
	return func(c *managerConfig) {
		if fn == nil {
			c.fail(fmt.Errorf("%w: WithKeyNormalizer(nil)", ErrInvalidOption))
		}
		c.normalizer = fn
	}
}

// WithActorSystem runs the Manager's actors in an existing protoactor-go actor
// system (github.com/asynkron/protoactor-go), so that they share its
// scheduler and logging with the application's own actors. Close stops the
// Manager's actors and leaves the system running. Default: the Manager
// creates a system of its own.
func WithActorSystem(sys *actor.ActorSystem) Option {
	return func(c *managerConfig) {
		if sys == nil {
			c.fail(fmt.Errorf("%w: WithActorSystem(nil)", ErrInvalidOption))
		}
		c.system = sys
	}
}

// WithRenewBatching sets how automatic renewals are coalesced for backends
// that renew in batches (all of leasehold's): at most size renewals per round
// trip, and a renewal goes at most delay (and at most a tenth of its lease's
// renewal period) before it is due, to share the round trip of renewals due
// then. A renewal is never sent late to wait for company. Defaults: 500 and
// 50ms (a delay of 0 keeps the default). A size of 1 turns batching off, and
// renewals then go when they are due.
func WithRenewBatching(size int, delay time.Duration) Option {
	return func(c *managerConfig) {
		if size < 1 || delay < 0 {
			c.fail(fmt.Errorf("%w: WithRenewBatching(%d, %v): size must be at least 1 and delay not negative", ErrInvalidOption, size, delay))
		}
		c.batchSize, c.batchDelay = size, delay
	}
}

// WithPickupWindow sets how long a store that keeps a waiter queue (Redis,
// PostgreSQL, SQL Server, memory) holds a released name for this Manager's
// waiter it was handed to, before it takes it back and hands it on; also how
// often such a waiter polls while it waits. A dead waiter delays the others
// at most this long, once. Default 2s; a lease's window is at most a quarter
// of its TTL.
func WithPickupWindow(d time.Duration) Option {
	return func(c *managerConfig) {
		if d < backend.MinTTL || d > backend.MaxTTL {
			c.fail(fmt.Errorf("%w: WithPickupWindow(%v): outside [%v, %v]", ErrInvalidOption, d, backend.MinTTL, backend.MaxTTL))
		}
		c.pickup = d
	}
}

func (c *managerConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WaitForever (-1), given to WithWait, waits until the context ends.
const WaitForever = lease.WaitForever

// MaxTTL (365 days) is the longest TTL a lease may have: the limit every backend
// accepts (backend.MaxTTL).
const MaxTTL = backend.MaxTTL

// DefaultTTL is the TTL of a lease acquired without WithTTL.
const DefaultTTL = 30 * time.Second

// AcquireOption configures one Acquire or Do. Options are validated before
// any backend action.
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	wait       time.Duration
	waitSet    bool // WithWait was given
	ttl        time.Duration
	renewEvery time.Duration // 0: TTL/3
	autoRenew  bool
	metadata   string
	limit      int // 1: exclusive
	err        error
}

func (c *acquireConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithWait sets how long Acquire waits for a lease held elsewhere: 0 (the
// default) makes one attempt; d > 0 waits up to d; WaitForever waits until the
// context ends. Local waiters for one name are served first come, first served.
func WithWait(d time.Duration) AcquireOption {
	return func(c *acquireConfig) {
		if d < 0 && d != WaitForever {
			c.fail(fmt.Errorf("%w: WithWait(%v): negative (use WaitForever to wait until the context ends)", ErrInvalidOption, d))
		}
		c.wait, c.waitSet = d, true
	}
}

// WithTTL sets how long the lease lasts without renewal, decided by the
// backend's clock. Default 30s; it must be within [1ms, MaxTTL].
func WithTTL(d time.Duration) AcquireOption {
	return func(c *acquireConfig) {
		if d < backend.MinTTL || d > MaxTTL {
			c.fail(fmt.Errorf("%w: WithTTL(%v): must be within [%v, %v]", ErrInvalidOption, d, backend.MinTTL, MaxTTL))
		}
		c.ttl = d
	}
}

// WithRenewEvery sets the auto-renewal period. Default TTL/3; it must be
// greater than 0 and at most the TTL less twice its safety margin (a tenth of
// the TTL, at most a second): 0.8 × TTL up to a 10 s TTL, TTL − 2s from
// there. A longer period could not have its renewal confirmed before the
// local deadline.
func WithRenewEvery(d time.Duration) AcquireOption {
	return func(c *acquireConfig) {
		if d <= 0 {
			c.fail(fmt.Errorf("%w: WithRenewEvery(%v): must be positive", ErrInvalidOption, d))
		}
		c.renewEvery = d
	}
}

// WithoutAutoRenew turns auto-renewal off: the lease is renewed only when
// Lease.Renew is called, and is lost at its local deadline otherwise.
func WithoutAutoRenew() AcquireOption {
	return func(c *acquireConfig) { c.autoRenew = false }
}

// WithMetadata stores s with the lease, visible to other owners (Held, and
// the backend's own records). At most 4000 bytes of UTF-8 without NUL.
func WithMetadata(s string) AcquireOption {
	return func(c *acquireConfig) {
		if err := backend.CheckMetadata(s); err != nil {
			c.fail(fmt.Errorf("%w: WithMetadata: %w", ErrInvalidOption, err))
		}
		c.metadata = s
	}
}

// MaxLimit (1024) is the largest WithLimit: the most holders one name may
// have at once (backend.MaxLimit). A backend may grant fewer
// (backend.Info.MaxLimit).
const MaxLimit = backend.MaxLimit

// WithLimit lets up to n holdings of the name be live at once, as a fenced
// semaphore: each Acquire with WithLimit(n) that is granted is a lease of
// its own (its own token, renewals, local deadline, loss, Release), and
// tokens increase across all of them. n = 1, the default, is the exclusive
// lease. n must be within [1, MaxLimit] and within the backend's own
// Info.MaxLimit (else ErrInvalidOption, before any backend call); every
// holder of a name must use the same n (else ErrLimitMismatch). A
// Manager's own Acquires of the name each take a slot: with a limit there
// is no "this Manager holds it already". See docs/semaphores.md.
func WithLimit(n int) AcquireOption {
	return func(c *acquireConfig) {
		if n < 1 || n > MaxLimit {
			c.fail(fmt.Errorf("%w: WithLimit(%d): must be within [1, %d]", ErrInvalidOption, n, MaxLimit))
		}
		c.limit = n
	}
}

// applyAcquireOptions applies opts to c. (A function of its own: the options
// move the config they are given to the heap, which an acquire without
// options need not pay for.)
func applyAcquireOptions(c acquireConfig, opts []AcquireOption) acquireConfig {
	p := &c
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	return *p
}

// acquireOptions applies opts over the defaults and checks them together.
func acquireOptions(opts []AcquireOption) (acquireConfig, error) {
	c := acquireConfig{ttl: DefaultTTL, autoRenew: true, limit: 1}
	if len(opts) > 0 {
		c = applyAcquireOptions(c, opts)
	}
	if c.err != nil {
		return c, c.err
	}
	if c.renewEvery == 0 {
		c.renewEvery = c.ttl / 3
	} else if most := engine.MaxRenewEvery(c.ttl); c.renewEvery > most {
		return c, fmt.Errorf("%w: WithRenewEvery(%v): at most %v with TTL %v (the local deadline is the TTL less a margin of %v, and a renewal needs as much again to be confirmed before it)",
			ErrInvalidOption, c.renewEvery, most, c.ttl, engine.HealthSlack(c.ttl))
	}
	return c, nil
}

// AcquireSettings is what a list of AcquireOptions asks for, for code that
// acquires on its caller's behalf (election.Run) and must refuse options
// that would break its own promise.
type AcquireSettings struct {
	TTL        time.Duration
	RenewEvery time.Duration
	AutoRenew  bool
	Metadata   string
	Limit      int
	// Wait is WithWait's; WaitSet says whether WithWait was given.
	Wait    time.Duration
	WaitSet bool
}

// SettingsOf applies opts over the defaults and checks them as Acquire does
// (ErrInvalidOption), without any backend call.
func SettingsOf(opts ...AcquireOption) (AcquireSettings, error) {
	c, err := acquireOptions(opts)
	if err != nil {
		return AcquireSettings{}, err
	}
	return AcquireSettings{
		TTL: c.ttl, RenewEvery: c.renewEvery, AutoRenew: c.autoRenew, Metadata: c.metadata,
		Limit: c.limit, Wait: c.wait, WaitSet: c.waitSet,
	}, nil
}
