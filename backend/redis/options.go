package redis

import (
	"log/slog"
	"time"
)

// DefaultKeyPrefix is the prefix of every Redis key and channel the backend
// uses unless WithKeyPrefix says otherwise.
const DefaultKeyPrefix = "leasehold:"

// Option configures a Backend.
type Option func(*config)

type config struct {
	prefix         string
	notify         bool
	queue          bool
	replicas       int
	confirmTimeout time.Duration
	restartGrace   time.Duration
	allowEviction  bool
	forgetAfter    time.Duration
	logger         *slog.Logger
	// watchIdle is how long the release watch waits for a message before it
	// pings the server to check the connection; unexported so tests can
	// shorten it.
	watchIdle time.Duration
	// onSubscribed, when set, is called each time the release watch has
	// confirmed its subscription; tests use it instead of sleeping.
	onSubscribed func()
}

func defaultConfig() config {
	return config{
		prefix:      DefaultKeyPrefix,
		notify:      true,
		queue:       true,
		forgetAfter: DefaultForgetAfter,
		logger:      slog.New(slog.DiscardHandler),
		watchIdle:   15 * time.Second,
	}
}

// WithKeyPrefix sets the prefix of the backend's own keys and of its release
// channel. Default DefaultKeyPrefix ("leasehold:"). Backends with different
// prefixes never see each other's leases. The prefix must not contain "{" or
// "}", which would break the per-name hash tag.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithReleaseNotifications turns the publishing of releases on or off. Default
// on. When off, Release publishes nothing and WatchReleases returns
// ErrNotificationsDisabled at once, so the engine polls instead.
func WithReleaseNotifications(on bool) Option {
	return func(c *config) { c.notify = on }
}

// WithWaiterQueue turns the waiter queue on or off. Default on: Info says
// Queue, a refused waiting Acquire with a backend.QueueRequest is queued, and
// a release hands the name to the head of its queue (backend/queue.go). Off,
// this backend queues nobody and Info says so, so that the engine's waiters
// poll; it still honours the queues other backends of the same prefix keep
// (a release hands on, a free name waits for its head's turn), so that
// processes configured differently, or upgraded one by one, treat waiters
// alike.
func WithWaiterQueue(on bool) Option {
	return func(c *config) { c.queue = on }
}

// WithReplicaConfirmation makes every grant and renewal wait (Redis WAIT) until
// at least replicas replicas acknowledged it, for at most timeout. An
// unconfirmed grant is released, and Acquire returns an error wrapping
// ErrNotConfirmed (a fault: nobody holds the name); so does an unconfirmed
// renewal. Default off (replicas 0).
// replicas must be >= 0 and timeout > 0 when replicas > 0; keep timeout below
// the client's ReadTimeout. It needs a *goredis.Client (single node or
// Sentinel failover) or a *goredis.ClusterClient, because WAIT must run on the
// connection that made the write.
func WithReplicaConfirmation(replicas int, timeout time.Duration) Option {
	return func(c *config) {
		c.replicas = replicas
		c.confirmTimeout = timeout
	}
}

// WithRestartGrace refuses to grant a free name until the Redis server that
// holds it has been up for at least d. Default 0 (off). Set it to the longest
// TTL in use: after a restart that lost writes (no persistence, an older RDB
// snapshot, the unsynced last second of an everysec AOF) a lease may be gone
// while its holder still believes it holds it, and nobody is granted that name
// until the holder's TTL has surely run out. Refused acquires report not
// acquired, with no holder, HolderExpiresAt at the end of the grace and
// HolderExpiresIn the time left.
//
// When the name is free the acquire script first reads LASTSAVE, which Redis
// sets to its start time and then to the end of each successful save: when
// that is longer ago than d, the server is old enough. Otherwise it reads the
// server's uptime with INFO server (about 4 µs on the server, more than the
// rest of the script), so INFO must be callable from scripts; otherwise such
// acquires fail with an error saying so. With save points that fire often,
// grants within d of a save pay for INFO. Use the grace only with Redis (or a
// fork that keeps LASTSAVE's meaning). That uptime
// is in whole seconds, so the grace may last up to 2 s longer than d, never
// less. A failover to a replica is not covered (a promoted replica is not
// young): use WithReplicaConfirmation for that.
func WithRestartGrace(d time.Duration) Option {
	return func(c *config) { c.restartGrace = d }
}

// DefaultForgetAfter is how long after its last grant a released name's
// record stays unless WithForgetAfter says otherwise.
const DefaultForgetAfter = time.Minute

// WithForgetAfter sets when the record of a name that a release (or revoke)
// leaves free, with nobody queued, is deleted: d after the name's last grant
// (its last token), or at once when that has passed. Default
// DefaultForgetAfter. A grant, or a queued waiter, keeps the record again.
// Any d >= 0 is safe: the name's next token rests on the server's clock,
// which has passed every token the name had once its record is gone
// (scripts/CONTRACT.md, "Forgetting a free name"); a longer d only spares
// a name in steady use the re-creation of its record. d < 0 is refused
// with ErrInvalidOption.
func WithForgetAfter(d time.Duration) Option {
	return func(c *config) { c.forgetAfter = d }
}

// WithEvictionAllowed makes New skip its check of the servers'
// maxmemory-policy, accepting the risk it guards against: with any policy but
// noeviction, Redis under memory pressure may delete a live lease (every lease
// has a TTL, so volatile-* policies pick them too) and grant its name to a
// second holder while the first still works. Use it when the policy is
// noeviction but cannot be read (CONFIG renamed or disabled, an ACL without
// +config), or when you accept eviction. New then makes no network call.
func WithEvictionAllowed() Option {
	return func(c *config) { c.allowEviction = true }
}

// WithLogger sets where the backend logs confirmation failures and watch
// reconnections. Default: discard. Credentials are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}
