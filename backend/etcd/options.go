package etcd

import (
	"errors"
	"log/slog"
	"time"
)

// DefaultKeyPrefix is the prefix of every etcd key the backend uses unless
// WithKeyPrefix says otherwise.
const DefaultKeyPrefix = "leasehold/"

// DefaultMinTTL is the shortest TTL the backend accepts unless WithMinTTL says
// otherwise: what an etcd member with the default timing (heartbeat 100ms,
// election timeout 1s) grants at least. etcd raises every lease to
// ceil(1.5 × election timeout) in whole seconds.
const DefaultMinTTL = 2 * time.Second

// ErrInvalidOption is returned (wrapped) by New for an option it cannot use.
var ErrInvalidOption = errors.New("etcd: invalid option")

// Option configures a Backend.
type Option func(*config)

type config struct {
	prefix string
	minTTL time.Duration
	logger *slog.Logger
}

func defaultConfig() config {
	return config{prefix: DefaultKeyPrefix, minTTL: DefaultMinTTL, logger: slog.New(slog.DiscardHandler)}
}

// WithKeyPrefix sets the prefix of the backend's etcd keys (each lease's key
// is the prefix, a NUL byte and the name). Default DefaultKeyPrefix
// ("leasehold/"). Backends with different prefixes never see each other's
// leases, also when one prefix starts the other; the prefix must not be empty (the backend would then
// watch and list the whole keyspace).
func WithKeyPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithMinTTL sets the shortest TTL Acquire and Renew accept; shorter TTLs are
// rejected with backend.ErrInvalidRequest before any call (the Manager
// reports leasehold.ErrInvalidOption). Default DefaultMinTTL (2s). Set it to
// ceil(1.5 × the cluster's election timeout) in whole seconds, at least 1s:
// etcd silently raises shorter leases to that, so a shorter TTL would not be
// the TTL the store keeps. It must be a whole number of seconds.
func WithMinTTL(d time.Duration) Option {
	return func(c *config) { c.minTTL = d }
}

// WithLogger sets where the backend logs release-watch interruptions and
// failed clean-ups. Default: discarded.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}
