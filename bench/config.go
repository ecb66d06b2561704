package main

import (
	"errors"
	"fmt"
	"time"
)

// errConfig marks an invalid command line or worker configuration.
var errConfig = errors.New("invalid configuration")

// Lock names accepted by -locks.
const (
	lockLeasehold = "leasehold"
	lockRedislock = "redislock" // github.com/bsm/redislock
	lockRedsync   = "redsync"   // github.com/go-redsync/redsync/v4, one node
	lockUnsafe    = "unsafe"    // deliberately broken: check, then set
)

// Backend names accepted by -backend.
const (
	backendMemory    = "memory"
	backendRedis     = "redis"
	backendPostgres  = "postgres"
	backendSQLServer = "sqlserver"
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
}

// contenders is the number of goroutines competing, over every process.
func (c runConfig) contenders() int { return c.Procs * c.Goroutines }

func (c runConfig) validate() error {
	switch c.Backend {
	case backendMemory:
		if c.Procs != 1 {
			return fmt.Errorf("%w: the memory backend is process-local: use -procs 1", errConfig)
		}
	case backendRedis, backendPostgres, backendSQLServer:
	default:
		return fmt.Errorf("%w: unknown backend %q", errConfig, c.Backend)
	}
	switch c.Lock {
	case lockLeasehold, lockUnsafe:
	case lockRedislock, lockRedsync:
		if c.Backend != backendRedis {
			return fmt.Errorf("%w: %s runs on redis only", errConfig, c.Lock)
		}
	case lockPGLock:
		if c.Backend != backendPostgres {
			return fmt.Errorf("%w: %s runs on postgres only", errConfig, c.Lock)
		}
	default:
		return fmt.Errorf("%w: unknown lock %q", errConfig, c.Lock)
	}
	if c.Lock == lockUnsafe && c.Backend != backendMemory && c.Backend != backendRedis {
		return fmt.Errorf("%w: the unsafe lock runs on memory or redis", errConfig)
	}
	switch {
	case c.Procs < 1 || c.Goroutines < 1 || c.Keys < 1:
		return fmt.Errorf("%w: processes, goroutines and names must be at least 1", errConfig)
	case c.Dist != "hot" && c.Dist != "uniform" && c.Dist != "zipf":
		return fmt.Errorf("%w: distribution %q (want hot, uniform or zipf)", errConfig, c.Dist)
	case c.Dist == "zipf" && c.ZipfS <= 1:
		return fmt.Errorf("%w: zipf exponent must be > 1", errConfig)
	case c.Hold < 0 || c.Think < 0:
		return fmt.Errorf("%w: negative hold or think time", errConfig)
	case c.TTL < time.Millisecond:
		return fmt.Errorf("%w: TTL below 1ms", errConfig)
	case c.Wait < 0 && c.Wait != waitForever:
		return fmt.Errorf("%w: wait must be positive or forever", errConfig)
	case c.Duration <= 0:
		return fmt.Errorf("%w: duration must be positive", errConfig)
	}
	return nil
}
