package main

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
)

// Documented retry settings of the peers, used unless -peer-poll overrides
// them: redislock's examples retry with LinearBackoff(100ms); redsync retries
// after a random 50-250ms (its defaults). Both poll: neither can be told of a
// release.
const (
	redislockPoll   = 100 * time.Millisecond
	redsyncMinDelay = 50 * time.Millisecond
	redsyncMaxDelay = 250 * time.Millisecond
)

// countingHook counts the commands and pipelines a client sends, each as one
// round trip.
type countingHook struct{ st *lockStats }

func (h countingHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h countingHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.st.roundTrips.Add(1)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.st.roundTrips.Add(1)
		return next(ctx, cmds)
	}
}

// waitCtx bounds one acquire by the run's wait policy.
func waitCtx(ctx context.Context, c runConfig) (context.Context, context.CancelFunc) {
	if c.Wait == waitForever {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.Wait)
}

// redislockLocker drives github.com/bsm/redislock: SET NX PX and a Lua
// release checking its random token; waiters poll.
type redislockLocker struct {
	cfg    runConfig
	client *goredis.Client
	lc     *redislock.Client
	poll   time.Duration
	st     lockStats
}

func newRedislockLocker(c runConfig) *redislockLocker {
	l := &redislockLocker{cfg: c, client: redisClient(c), poll: redislockPoll}
	if c.PeerPoll > 0 {
		l.poll = c.PeerPoll
	}
	l.client.AddHook(countingHook{&l.st})
	l.lc = redislock.New(l.client)
	return l
}

// countingRetry counts every retry of a waiter (all of them polls).
type countingRetry struct {
	redislock.RetryStrategy
	st *lockStats
}

func (r countingRetry) NextBackoff() time.Duration {
	r.st.pollWakes.Add(1)
	return r.RetryStrategy.NextBackoff()
}

func (l *redislockLocker) acquire(ctx context.Context, name string) (holding, error) {
	wctx, cancel := waitCtx(ctx, l.cfg)
	defer cancel()
	lock, err := l.lc.Obtain(wctx, name, l.cfg.TTL, &redislock.Options{
		RetryStrategy: countingRetry{redislock.LinearBackoff(l.poll), &l.st},
	})
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)) {
			return nil, errNotAcquired
		}
		return nil, err
	}
	return redislockHolding{lock}, nil
}

func (l *redislockLocker) stats() *lockStats { return &l.st }

func (l *redislockLocker) close(context.Context) error { return l.client.Close() }

type redislockHolding struct{ l *redislock.Lock }

func (redislockHolding) token() uint64         { return 0 }
func (redislockHolding) lost() <-chan struct{} { return nil }

// held is true: redislock keeps no local view of its expiry (TTL asks the
// server).
func (redislockHolding) held() bool { return true }

func (h redislockHolding) release(ctx context.Context) (bool, error) {
	err := h.l.Release(ctx)
	if errors.Is(err, redislock.ErrLockNotHeld) {
		return true, nil
	}
	return false, err
}

// redsyncLocker drives github.com/go-redsync/redsync/v4 with one node (its
// Redlock algorithm with a quorum of one): SET NX PX, Lua release.
type redsyncLocker struct {
	cfg    runConfig
	client *goredis.Client
	rs     *redsync.Redsync
	st     lockStats
}

func newRedsyncLocker(c runConfig) *redsyncLocker {
	l := &redsyncLocker{cfg: c, client: redisClient(c)}
	l.client.AddHook(countingHook{&l.st})
	l.rs = redsync.New(redsyncgoredis.NewPool(l.client))
	return l
}

func (l *redsyncLocker) delay(int) time.Duration {
	l.st.pollWakes.Add(1)
	if l.cfg.PeerPoll > 0 {
		return l.cfg.PeerPoll
	}
	return redsyncMinDelay + rand.N(redsyncMaxDelay-redsyncMinDelay)
}

func (l *redsyncLocker) acquire(ctx context.Context, name string) (holding, error) {
	wctx, cancel := waitCtx(ctx, l.cfg)
	defer cancel()
	// Unlimited tries: the wait policy bounds the attempt, as for everyone.
	m := l.rs.NewMutex(name, redsync.WithExpiry(l.cfg.TTL), redsync.WithTries(math.MaxInt32), redsync.WithRetryDelayFunc(l.delay))
	err := m.LockContext(wctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ne net.Error
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return nil, errNotAcquired
		}
		return nil, err
	}
	return redsyncHolding{m}, nil
}

func (l *redsyncLocker) stats() *lockStats { return &l.st }

func (l *redsyncLocker) close(context.Context) error { return l.client.Close() }

type redsyncHolding struct{ m *redsync.Mutex }

func (redsyncHolding) token() uint64         { return 0 }
func (redsyncHolding) lost() <-chan struct{} { return nil }

// held is redsync's own validity: the expiry it computed at the grant, less
// its drift allowance.
func (h redsyncHolding) held() bool { return time.Now().Before(h.m.Until()) }

func (h redsyncHolding) release(ctx context.Context) (bool, error) {
	ok, err := h.m.UnlockContext(ctx)
	if errors.Is(err, redsync.ErrLockAlreadyExpired) || err == nil && !ok {
		return true, nil
	}
	return false, err
}
