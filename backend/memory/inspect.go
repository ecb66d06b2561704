package memory

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Inspect returns the live holding of key.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Holder, bool, error) {
	if err := check(ctx, backend.CheckText("key", key)); err != nil {
		return backend.Holder{}, false, err
	}
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := b.now()
	e := s.leases[key]
	if e == nil || !now.Before(e.expires) {
		if m := s.liveSemLocked(key, now); m != nil { // the holding that ends first
			return m.holds[m.first()].holding(key, now, m.limit), true, nil
		}
		return backend.Holder{}, false, nil
	}
	return e.holding(key, now, 1), true, nil
}

// Holders returns every live holding of key, in token order.
func (b *Backend) Holders(ctx context.Context, key string) ([]backend.Holder, error) {
	if err := check(ctx, backend.CheckText("key", key)); err != nil {
		return nil, err
	}
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := b.now()
	if e := s.leases[key]; e != nil && now.Before(e.expires) {
		return []backend.Holder{e.holding(key, now, 1)}, nil
	}
	return s.semHoldersLocked(key, now), nil
}

// List calls fn with the live holdings under prefix, in key order.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := b.now()
	var hs []backend.Holder
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for k, e := range s.leases {
			if strings.HasPrefix(k, prefix) && now.Before(e.expires) {
				hs = append(hs, e.holding(k, now, 1))
			}
		}
		for k, m := range s.sems {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			for _, e := range m.holds {
				if now.Before(e.expires) {
					hs = append(hs, e.holding(k, now, m.limit))
				}
			}
		}
		s.mu.Unlock()
	}
	sort.Slice(hs, func(i, j int) bool {
		return hs[i].Key < hs[j].Key || (hs[i].Key == hs[j].Key && hs[i].Token < hs[j].Token)
	})
	for _, h := range hs {
		if !fn(h) {
			break
		}
	}
	return nil
}

// Revoke ends the live holding of key (of token, unless it is 0).
func (b *Backend) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	if err := check(ctx, backend.CheckText("key", key)); err != nil {
		return backend.Holder{}, false, err
	}
	s := b.shard(key)
	s.mu.Lock()
	now := b.now()
	e := s.leases[key]
	if e == nil || !now.Before(e.expires) || (token != 0 && e.token != token) {
		h, ok, ho, addr, handed := b.revokeSemLocked(s, key, token, now)
		s.mu.Unlock()
		switch {
		case handed:
			b.sendHandOff(addr, ho)
		case ok:
			b.notify(key)
		}
		return h, ok, nil
	}
	h := e.holding(key, now, 1)
	s.deleteLocked(key)
	ho, addr, handed := b.handOnLocked(s, key, now) // as a release does
	s.mu.Unlock()
	if handed {
		b.sendHandOff(addr, ho)
	} else {
		b.notify(key) // a revoke wakes waiters whether or not they marked it
	}
	return h, true, nil
}

func (e *entry) holding(key string, now time.Time, limit int) backend.Holder {
	return backend.Holder{Key: key, Owner: e.owner, Token: e.token, ExpiresAt: e.expires, ExpiresIn: e.expires.Sub(now), Metadata: e.metadata, Limit: limit}
}
