package main

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// unsafeLocker is deliberately broken, to prove the safety checker catches a
// broken lock: it checks that a name is free, then, in a separate step, sets
// itself as holder, and draws its "fencing token" by reading a counter and
// writing it back plus one. Two contenders that both see the name free both
// take it, and both may draw the same token. Under a limit n above 1 it is
// a broken semaphore the same way: n slots, each taken by check, then set,
// so that n+1 contenders can hold the name at once.
//
// On the memory backend its store is a map shared by the goroutines of the
// process; on redis it is GET then SET (no NX), the classic broken Redis lock.
type unsafeLocker struct {
	cfg    runConfig
	me     string // the value it writes as holder
	store  unsafeStore
	client *goredis.Client
	st     lockStats
}

// unsafeStore is a key-value store with no compare-and-set.
type unsafeStore interface {
	get(ctx context.Context, k string) (string, error)
	set(ctx context.Context, k, v string) error
	del(ctx context.Context, k string) error
}

// unsafePoll is how long a waiter of the unsafe lock sleeps between checks.
const unsafePoll = 200 * time.Microsecond

func newUnsafeLocker(c runConfig, proc int) *unsafeLocker {
	l := &unsafeLocker{cfg: c, me: "p" + strconv.Itoa(proc)}
	if c.Backend == backendRedis {
		l.client = redisClient(c)
		l.client.AddHook(countingHook{&l.st})
		l.store = redisStore{l.client}
	} else {
		l.store = &mapStore{m: map[string]string{}}
	}
	return l
}

func (l *unsafeLocker) acquire(ctx context.Context, name string) (holding, error) {
	wctx, cancel := waitCtx(ctx, l.cfg)
	defer cancel()
	me := l.me
	for first := true; ; first = false {
		if !first {
			l.st.pollWakes.Add(1)
		}
		for slot := range l.cfg.limit() {
			key := unsafeSlot(name, slot)
			v, err := l.store.get(wctx, key)
			if err != nil {
				return nil, l.ctxErr(ctx, wctx, err)
			}
			if v != "" {
				continue
			}
			// The broken part: between the check and the set another
			// contender may check too. Yield to make that likely.
			runtime.Gosched()
			if err := l.store.set(wctx, key, me); err != nil {
				return nil, l.ctxErr(ctx, wctx, err)
			}
			t, err := l.store.get(wctx, name+":token")
			if err != nil {
				return nil, l.ctxErr(ctx, wctx, err)
			}
			n, _ := strconv.ParseUint(t, 10, 64)
			runtime.Gosched()
			if err := l.store.set(wctx, name+":token", strconv.FormatUint(n+1, 10)); err != nil {
				return nil, l.ctxErr(ctx, wctx, err)
			}
			return unsafeHolding{l: l, name: key, tok: n + 1}, nil
		}
		select {
		case <-wctx.Done():
			return nil, l.ctxErr(ctx, wctx, wctx.Err())
		case <-time.After(unsafePoll):
		}
	}
}

// unsafeSlot is the key of slot i of name: the name itself for the first
// (the only one of an exclusive lock).
func unsafeSlot(name string, i int) string {
	if i == 0 {
		return name
	}
	return name + ":slot" + strconv.Itoa(i)
}

// ctxErr turns the end of the wait into errNotAcquired.
func (l *unsafeLocker) ctxErr(ctx, wctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if wctx.Err() != nil {
		return errNotAcquired
	}
	return err
}

func (l *unsafeLocker) stats() *lockStats { return &l.st }

func (l *unsafeLocker) close(context.Context) error {
	if l.client != nil {
		return l.client.Close()
	}
	return nil
}

type unsafeHolding struct {
	l    *unsafeLocker
	name string
	tok  uint64
}

func (h unsafeHolding) token() uint64         { return h.tok }
func (h unsafeHolding) lost() <-chan struct{} { return nil }
func (h unsafeHolding) held() bool            { return true }

func (h unsafeHolding) release(ctx context.Context) (bool, error) {
	return false, h.l.store.del(ctx, h.name)
}

// mapStore is an in-process unsafeStore; each call is atomic, their sequence
// is not.
type mapStore struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *mapStore) get(_ context.Context, k string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k], nil
}

func (s *mapStore) set(_ context.Context, k, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return nil
}

func (s *mapStore) del(_ context.Context, k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

// redisStore is an unsafeStore on Redis (keys under the run's prefix).
type redisStore struct{ c *goredis.Client }

func (s redisStore) get(ctx context.Context, k string) (string, error) {
	v, err := s.c.Get(ctx, "lhbench-unsafe:"+k).Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	return v, err
}

func (s redisStore) set(ctx context.Context, k, v string) error {
	return s.c.Set(ctx, "lhbench-unsafe:"+k, v, time.Hour).Err()
}

func (s redisStore) del(ctx context.Context, k string) error {
	return s.c.Del(ctx, "lhbench-unsafe:"+k).Err()
}
