package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// sweepEvery is how many acquires pass between scans for expired entries, so
// that memory follows live leases even for names never touched again.
const sweepEvery = 1024

// Backend is the in-process lease store. The zero value is not usable; call New.
type Backend struct {
	mu       sync.Mutex
	leases   map[string]*entry
	lastTok  uint64 // one counter for all keys: increasing overall is increasing per key
	acquires int
	watchers map[int]func(string)
	nextW    int
	peak     int // most leases held at once since the map was made
}

// shrinkAbove is the peak above which an emptied lease map is made afresh.
const shrinkAbove = 1024

type entry struct {
	owner    string
	attempt  string // the acquire attempt that made this holding
	token    uint64
	expires  time.Time
	metadata string
	waited   bool // a refused acquire will wait: announce the release
}

var (
	_ backend.Backend        = (*Backend)(nil)
	_ backend.ReleaseWatcher = (*Backend)(nil)
	_ backend.BatchRenewer   = (*Backend)(nil)
	_ backend.Immediate      = (*Backend)(nil)
)

// New returns an empty store.
func New() *Backend {
	return &Backend{leases: map[string]*entry{}, watchers: map[int]func(string){}}
}

// Info reports Name "memory", ProcessLocal true.
func (b *Backend) Info() backend.Info { return backend.Info{Name: "memory", ProcessLocal: true} }

// Immediate marks calls as never waiting on I/O.
func (b *Backend) Immediate() {}

// Acquire grants r.Key when it is free or expired, or refreshes the live
// holding that r.Attempt itself made (a retried attempt).
func (b *Backend) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := check(ctx, r.Validate()); err != nil {
		return backend.Grant{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.acquires++
	if b.acquires%sweepEvery == 0 {
		b.sweepLocked(now)
	}
	e := b.leases[r.Key]
	switch {
	case e != nil && now.Before(e.expires) && (e.attempt != r.Attempt || e.owner != r.Owner):
		e.waited = e.waited || r.Wait
		return backend.Grant{Holder: e.owner, HolderToken: e.token, HolderExpiresAt: e.expires, HolderExpiresIn: e.expires.Sub(now)}, nil
	case e != nil && now.Before(e.expires): // the same attempt again: refresh, keep token
		e.expires, e.metadata = now.Add(r.TTL), r.Metadata
	default:
		b.lastTok++
		e = &entry{owner: r.Owner, attempt: r.Attempt, token: b.lastTok, expires: now.Add(r.TTL), metadata: r.Metadata}
		b.leases[r.Key] = e
		b.peak = max(b.peak, len(b.leases))
	}
	return backend.Grant{Acquired: true, Token: e.token, ExpiresAt: e.expires}, nil
}

// Renew extends the live holding named by (Key, Owner, Attempt, Token).
func (b *Backend) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if err := check(ctx, r.Validate()); err != nil {
		return backend.Grant{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.renewLocked(time.Now(), r)
}

// RenewBatch renews every request under one lock.
func (b *Backend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]backend.RenewResult, len(rs))
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			out[i].Err = err
			continue
		}
		out[i].Grant, out[i].Err = b.renewLocked(now, r)
	}
	return out, nil
}

func (b *Backend) renewLocked(now time.Time, r backend.RenewRequest) (backend.Grant, error) {
	e := b.leases[r.Key]
	if e == nil || !e.is(r.Owner, r.Attempt, r.Token) || !now.Before(e.expires) {
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
	b.mu.Lock()
	e := b.leases[r.Key]
	released := e != nil && e.is(r.Owner, r.Attempt, r.Token)
	if released {
		b.deleteLocked(r.Key)
	}
	var notify []func(string)
	if released && e.waited { // nobody waits, nobody is told: see AcquireRequest.Wait
		notify = b.watchersLocked()
	}
	b.mu.Unlock()
	for _, fn := range notify {
		fn(r.Key)
	}
	return nil
}

// is reports whether e is the holding named by owner, attempt and token (0:
// any token of that attempt).
func (e *entry) is(owner, attempt string, token uint64) bool {
	return e.owner == owner && e.attempt == attempt && (token == 0 || e.token == token)
}

// watchersLocked copies the release watchers, to be called without the lock.
func (b *Backend) watchersLocked() []func(string) {
	if len(b.watchers) == 0 {
		return nil
	}
	out := make([]func(string), 0, len(b.watchers))
	for _, fn := range b.watchers {
		out = append(out, fn)
	}
	return out
}

// WatchReleases calls fn with every released key until ctx ends.
func (b *Backend) WatchReleases(ctx context.Context, fn func(key string)) error {
	b.mu.Lock()
	id := b.nextW
	b.nextW++
	b.watchers[id] = fn
	b.mu.Unlock()
	<-ctx.Done()
	b.mu.Lock()
	delete(b.watchers, id)
	b.mu.Unlock()
	return ctx.Err()
}

// Len reports how many unexpired leases the store holds (for tests and
// memory measurements).
func (b *Backend) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepLocked(time.Now())
	return len(b.leases)
}

// Close does nothing: the store has no resources to free.
func (b *Backend) Close() error { return nil }

func (b *Backend) sweepLocked(now time.Time) {
	for k, e := range b.leases {
		if !now.Before(e.expires) {
			b.deleteLocked(k)
		}
	}
}

func (b *Backend) deleteLocked(key string) {
	delete(b.leases, key)
	if len(b.leases) == 0 && b.peak > shrinkAbove {
		// Go maps never shrink: start afresh once a big map is empty (a
		// small one is kept, or a lone acquire/release loop would make a
		// new map every cycle).
		b.leases, b.peak = map[string]*entry{}, 0
	}
}

// check returns the request's validation error, else the context's.
func check(ctx context.Context, invalid error) error {
	if invalid != nil {
		return invalid
	}
	return ctx.Err()
}
