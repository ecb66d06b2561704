package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// sweepEvery is how many acquires of one shard pass between its scans for
// expired entries, so that memory follows live leases even for names never
// touched again.
const sweepEvery = 1024

// shards spreads the store's lock: calls on different names rarely wait for
// each other (one lock for the whole store was the busiest lock of a
// Manager driven by 64 goroutines).
const shards = 32

// shrinkAbove is the peak above which an emptied shard map is made afresh.
const shrinkAbove = 1024

// Backend is the in-process lease store. The zero value is not usable; call New.
type Backend struct {
	backend.Unsupported // Batch and Shard: one lock step per call, one shard

	seed   maphash.Seed
	shards [shards]shard
	// lastTok is one counter for all keys: increasing overall is increasing
	// per key (a key's calls are serialized by its shard's lock).
	lastTok atomic.Uint64

	// now is the store's clock (WithClock). A call that changes a key
	// reads it under the key's shard lock, within its atomic step, so that
	// the steps on one key see their times in the order they are made. A
	// hand-off's pickup window counts from the release's reading, and the
	// engine counts the new holder's local deadline from the send of the
	// last poll the store handled before it: a reading taken before the
	// lock, by a release that then waited for it, could be older than
	// that poll, and the store would let the key go before the holder
	// stops holding it.
	now func() time.Time

	wmu      sync.Mutex
	watchers map[int]func(string)
	handoffs map[string]map[int]func(backend.HandOff) // by address
	nextW    int
}

type shard struct {
	mu       sync.Mutex
	leases   map[string]*entry
	queues   map[string]*waitQueue // keys somebody waits for (queue.go)
	sems     map[string]*semaphore // keys held under a limit above 1 (semaphore.go)
	acquires int
	peak     int // most leases held at once since the map was made
	_        [32]byte
}

type entry struct {
	owner    string
	attempt  string // the acquire attempt that made this holding
	token    uint64
	expires  time.Time
	metadata string
	waited   bool // a refused acquire will wait: announce the release
}

var _ backend.Backend = (*Backend)(nil)

// Option configures a Backend.
type Option func(*Backend)

// WithClock sets the store's clock, which decides every expiry (default
// time.Now). A test can move it on to expire holdings without waiting for
// them; it must never go back. It is read within the store's steps, under
// their locks: it must not call the store.
func WithClock(now func() time.Time) Option {
	return func(b *Backend) {
		if now != nil {
			b.now = now
		}
	}
}

// New returns an empty store.
func New(opts ...Option) *Backend {
	b := &Backend{seed: maphash.MakeSeed(), now: time.Now, watchers: map[int]func(string){}, handoffs: map[string]map[int]func(backend.HandOff){}}
	for _, o := range opts {
		if o != nil {
			o(b)
		}
	}
	for i := range b.shards {
		b.shards[i].leases = map[string]*entry{}
		b.shards[i].queues = map[string]*waitQueue{}
		b.shards[i].sems = map[string]*semaphore{}
	}
	return b
}

func (b *Backend) shard(key string) *shard {
	return &b.shards[maphash.String(b.seed, key)%shards]
}

// Info reports Name "memory", ProcessLocal, Queue, Inline (no call waits on
// I/O), AnnouncesReleases, HandOffNotices and MaxLimit backend.MaxLimit.
func (b *Backend) Info() backend.Info {
	return backend.Info{Name: "memory", ProcessLocal: true, Queue: true, Inline: true,
		AnnouncesReleases: true, HandOffNotices: true, MaxLimit: backend.MaxLimit}
}

// Acquire grants r.Key when it is free or expired, or refreshes the live
// holding that r.Attempt itself made (a retried attempt).
func (b *Backend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := check(ctx, r.Validate()); err != nil {
		return backend.Grant{}, err
	}
	s := b.shard(r.Key)
	s.mu.Lock()
	now := b.now() // within the step (see Backend.now)
	s.acquires++
	if s.acquires%sweepEvery == 0 {
		s.sweepLocked(now)
	}
	if r.Limit > 1 {
		g, hs := b.acquireSemLocked(s, r, now)
		s.mu.Unlock()
		for _, h := range hs {
			b.sendHandOff(h.addr, h.h)
		}
		return g, nil
	}
	defer s.mu.Unlock()
	e := s.leases[r.Key]
	switch {
	case e != nil && now.Before(e.expires) && (e.attempt != r.Attempt || e.owner != r.Owner):
		e.waited = e.waited || r.Wait
		queued := s.enqueueLocked(r.Key, r, now)
		return backend.Grant{Holder: e.owner, HolderToken: e.token, HolderExpiresAt: e.expires, HolderExpiresIn: e.expires.Sub(now), Queued: queued}, nil
	case e != nil && now.Before(e.expires): // the same attempt again: refresh, keep token
		e.expires, e.metadata = now.Add(r.TTL), r.Metadata
	default:
		if m := s.liveSemLocked(r.Key, now); m != nil { // held under a limit above 1
			g := m.refusal(now)
			g.HeldLimit = m.limit
			return g, nil
		}
		if turn := s.turnLocked(r.Key, r, now); turn > 0 { // the head waiter's turn
			queued := s.enqueueLocked(r.Key, r, now)
			return backend.Grant{HolderExpiresAt: now.Add(turn), HolderExpiresIn: turn, Queued: queued}, nil
		}
		e = &entry{owner: r.Owner, attempt: r.Attempt, token: b.lastTok.Add(1), expires: now.Add(r.TTL), metadata: r.Metadata}
		e.waited = s.grantedLocked(r.Key, r.Owner, r.Attempt)
		s.leases[r.Key] = e
		s.peak = max(s.peak, len(s.leases))
	}
	return backend.Grant{Acquired: true, Token: e.token, ExpiresAt: e.expires}, nil
}

// Renew extends the live holding named by (Key, Owner, Attempt, Token).
func (b *Backend) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if err := check(ctx, r.Validate()); err != nil {
		return backend.Grant{}, err
	}
	s := b.shard(r.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewLocked(b.now(), r)
}

// RenewBatch renews every request, each under its own shard's lock.
func (b *Backend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]backend.RenewResult, len(rs))
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			out[i].Err = err
			continue
		}
		s := b.shard(r.Key)
		s.mu.Lock()
		out[i].Grant, out[i].Err = s.renewLocked(b.now(), r)
		s.mu.Unlock()
	}
	return out, nil
}

func (s *shard) renewLocked(now time.Time, r backend.RenewRequest) (backend.Grant, error) {
	e := s.leases[r.Key]
	if e == nil || !e.is(r.Owner, r.Attempt, r.Token) || !now.Before(e.expires) {
		if g, ok := s.renewSemLocked(now, r); ok {
			return g, nil
		}
		return backend.Grant{}, fmt.Errorf("memory: renew %q: %w", r.Key, backend.ErrNotHeld)
	}
	e.expires = now.Add(r.TTL)
	return backend.Grant{Acquired: true, Token: e.token, ExpiresAt: e.expires}, nil
}

// Release ends the holding named by (Key, Owner, Attempt, Token); Token 0
// matches the attempt's holding whatever its token.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := check(ctx, r.Validate()); err != nil {
		return err
	}
	s := b.shard(r.Key)
	s.mu.Lock()
	now := b.now()
	e := s.leases[r.Key]
	released := e != nil && e.is(r.Owner, r.Attempt, r.Token)
	var (
		h        backend.HandOff
		addr     string
		handed   bool
		wasLive  = released && now.Before(e.expires)
		announce = released && e.waited // nobody waits, nobody is told: see AcquireRequest.Wait
		found    bool
	)
	switch {
	case released:
		s.deleteLocked(r.Key)
		if wasLive { // an expired holding hands nothing on (queue.go)
			h, addr, handed = b.handOnLocked(s, r.Key, now)
		}
	default:
		if found, announce, h, addr, handed = b.releaseSemLocked(s, r, now); !found {
			s.leaveLocked(r.Key, r.Owner, r.Attempt)
		}
	}
	s.mu.Unlock()
	switch {
	case handed:
		b.sendHandOff(addr, h)
	case announce:
		b.notify(r.Key)
	}
	return nil
}

// is reports whether e is the holding named by owner, attempt and token (0:
// any token of that attempt).
func (e *entry) is(owner, attempt string, token uint64) bool {
	return e.owner == owner && e.attempt == attempt && (token == 0 || e.token == token)
}

// notify tells every release watcher that key was released (called with no
// lock held: a watcher may call the store).
func (b *Backend) notify(key string) {
	b.wmu.Lock()
	if len(b.watchers) == 0 {
		b.wmu.Unlock()
		return
	}
	fns := make([]func(string), 0, len(b.watchers))
	for _, fn := range b.watchers {
		fns = append(fns, fn)
	}
	b.wmu.Unlock()
	for _, fn := range fns {
		fn(key)
	}
}

// WatchReleases calls fn with every released key until ctx ends.
func (b *Backend) WatchReleases(ctx context.Context, fn func(key string)) error {
	b.wmu.Lock()
	id := b.nextW
	b.nextW++
	b.watchers[id] = fn
	b.wmu.Unlock()
	<-ctx.Done()
	b.wmu.Lock()
	delete(b.watchers, id)
	b.wmu.Unlock()
	return ctx.Err()
}

// Len reports how many unexpired leases the store holds (for tests and
// memory measurements).
func (b *Backend) Len() int {
	now, n := b.now(), 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		s.sweepLocked(now)
		n += len(s.leases)
		for _, m := range s.sems {
			n += len(m.holds)
		}
		s.mu.Unlock()
	}
	return n
}

// Close does nothing: the store has no resources to free.
func (b *Backend) Close() error { return nil }

func (s *shard) sweepLocked(now time.Time) {
	for k, e := range s.leases {
		if !now.Before(e.expires) {
			s.deleteLocked(k)
		}
	}
	for k := range s.sems {
		s.liveSemLocked(k, now)
	}
	s.sweepQueuesLocked(now)
}

func (s *shard) deleteLocked(key string) {
	delete(s.leases, key)
	if len(s.leases) == 0 && s.peak > shrinkAbove {
		// Go maps never shrink: start afresh once a big map is empty (a
		// small one is kept, or a lone acquire/release loop would make a
		// new map every cycle).
		s.leases, s.peak = map[string]*entry{}, 0
	}
}

// check returns the request's validation error, else the context's.
func check(ctx context.Context, invalid error) error {
	if invalid != nil {
		return invalid
	}
	return ctx.Err()
}
