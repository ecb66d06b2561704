package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
)

// errConfig marks an invalid command line or worker configuration.
var errConfig = errors.New("invalid configuration")

// Lock names accepted by -locks.
const (
	lockLeasehold = "leasehold"
	lockRedislock = "redislock" // github.com/bsm/redislock
	// lockGoroutinePerLock is the scale mode's peer on memory: a
	// goroutine, a ticker and a Renew per lock.
	lockGoroutinePerLock = "goroutine-per-lock"
	lockRedsync          = "redsync" // github.com/go-redsync/redsync/v4, one node
	lockUnsafe           = "unsafe"  // deliberately broken: check, then set
)

// Backend names accepted by -backend.
const (
	backendMemory    = "memory"
	backendRedis     = "redis"
	backendPostgres  = "postgres"
	backendSQLServer = "sqlserver"
	backendMySQL     = "mysql"
)

// WaitForever as a Config.Wait: a contender waits for a name until the run
// ends.
const waitForever time.Duration = -1

// runConfig is what one run of one lock needs; the parent hands it to every
// worker process. The zero value is not valid: see validate.
type runConfig struct {
	Backend      string
	RedisAddr    string // host:port the contenders dial (maybe the chaos proxy)
	PostgresDSN  string
	SQLServerDSN string
	MySQLDSN     string
	Lock         string
	Procs        int
	Goroutines   int
	Keys         int
	Dist         string  // "hot", "uniform" or "zipf"
	ZipfS        float64 // zipf exponent (> 1)
	Hold         time.Duration
	Think        time.Duration // pause after a release before the next acquire
	TTL          time.Duration
	Wait         time.Duration // waitForever or a bound per attempt
	PeerPoll     time.Duration // 0: each peer's documented retry setting
	Duration     time.Duration
	Prefix       string // unique per run: no run sees another's keys
	RecordPath   string // shared record file
	RestartGrace time.Duration
	Seed         uint64
	Rep          int // which repetition of this configuration (-repeat), from 1
	// Limit is the most holders of a name at once (-limit): 1 (or 0) an
	// exclusive lock, above 1 a semaphore.
	Limit int
}

// limit is the run's limit of holders per name, at least 1.
func (c runConfig) limit() int { return max(c.Limit, 1) }

// contenders is the number of goroutines competing, over every process.
func (c runConfig) contenders() int { return c.Procs * c.Goroutines }

// validate checks one run's configuration. Its messages name the command-line
// flag that sets each field, since the parent checks every run of a command
// line with it before starting any (see checkCombinations).
func (c runConfig) validate() error {
	switch c.Backend {
	case backendMemory:
		if c.Procs != 1 {
			return fmt.Errorf("%w: -procs %d: the memory backend lives inside one process, so it runs with -procs 1 only; for several processes use -backend redis, postgres, sqlserver or mysql", errConfig, c.Procs)
		}
	case backendRedis, backendPostgres, backendMySQL:
	case backendSQLServer:
		if c.SQLServerDSN == "" {
			return fmt.Errorf("%w: -backend sqlserver needs a DSN: set -sqlserver or $LEASEHOLD_SQLSERVER_DSN", errConfig)
		}
	default:
		return fmt.Errorf("%w: -backend %q: want memory, redis, postgres, sqlserver or mysql", errConfig, c.Backend)
	}
	switch c.Lock {
	case lockLeasehold:
	case lockUnsafe:
		if c.Backend != backendMemory && c.Backend != backendRedis {
			return fmt.Errorf("%w: -locks %s runs on -backend memory or redis only", errConfig, c.Lock)
		}
	case lockRedislock, lockRedsync:
		if c.Backend != backendRedis {
			return fmt.Errorf("%w: -locks %s runs on -backend redis only", errConfig, c.Lock)
		}
	case lockPGLock:
		if c.Backend != backendPostgres {
			return fmt.Errorf("%w: -locks %s runs on -backend postgres only", errConfig, c.Lock)
		}
	default:
		return fmt.Errorf("%w: -locks %q: want leasehold, redislock, redsync, %s or unsafe", errConfig, c.Lock, lockPGLock)
	}
	switch {
	case c.Procs < 1:
		return fmt.Errorf("%w: -procs %d: at least 1", errConfig, c.Procs)
	case c.Goroutines < 1:
		return fmt.Errorf("%w: -goroutines %d: at least 1", errConfig, c.Goroutines)
	case c.Keys < 1:
		return fmt.Errorf("%w: -keys %d: at least 1", errConfig, c.Keys)
	case c.Dist != "hot" && c.Dist != "uniform" && c.Dist != "zipf":
		return fmt.Errorf("%w: -dist %q: want hot, uniform or zipf", errConfig, c.Dist)
	case c.Dist == "zipf" && c.ZipfS <= 1:
		return fmt.Errorf("%w: -zipf-s %g: must be above 1", errConfig, c.ZipfS)
	case c.Hold < 0:
		return fmt.Errorf("%w: -hold %v: negative", errConfig, c.Hold)
	case c.Think < 0:
		return fmt.Errorf("%w: -think %v: negative", errConfig, c.Think)
	case c.TTL < time.Millisecond:
		return fmt.Errorf("%w: -ttl %v: below 1ms", errConfig, c.TTL)
	case c.Wait < 0 && c.Wait != waitForever:
		return fmt.Errorf("%w: -wait %v: want a positive duration or forever", errConfig, c.Wait)
	case c.PeerPoll < 0:
		return fmt.Errorf("%w: -peer-poll %v: negative", errConfig, c.PeerPoll)
	case c.Duration <= 0:
		return fmt.Errorf("%w: -duration %v: must be positive", errConfig, c.Duration)
	case c.Limit < 0 || c.Limit > leasehold.MaxLimit: // 0: 1
		return fmt.Errorf("%w: -limit %d: want 1 (an exclusive lock) to %d", errConfig, c.Limit, leasehold.MaxLimit)
	case c.Limit > 1 && isPeer(c.Lock):
		return fmt.Errorf("%w: -limit %d: -locks %s has no semaphore; a limit above 1 runs leasehold (and unsafe) only", errConfig, c.Limit, c.Lock)
	}
	return nil
}

// peersOf are the other libraries the bench runs on backend by default.
func peersOf(backend string) []string {
	switch backend {
	case backendRedis:
		return []string{lockRedislock, lockRedsync}
	case backendPostgres:
		return []string{lockPGLock}
	}
	return nil
}

// leftOutNote says which of the backend's peers a run of limit above 1
// leaves out, and why; "" when none.
func leftOutNote(backend string, limit int) string {
	peers := peersOf(backend)
	if limit <= 1 || len(peers) == 0 {
		return ""
	}
	if len(peers) == 1 {
		return fmt.Sprintf("-limit %d: %s has no semaphore and is left out", limit, peers[0])
	}
	return fmt.Sprintf("-limit %d: %s have no semaphore and are left out", limit, strings.Join(peers, " and "))
}
