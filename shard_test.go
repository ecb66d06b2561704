package leasehold_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
)

// shardedStore is a memory store in two shards, named by the key's first
// byte, that renews and batches as Redis does. While frozen, every round
// trip that touches shard "f" waits until its context ends, as one to a
// Cluster master that stopped answering does (a pipeline waits for every
// node it goes to); shard "l" answers at once.
type shardedStore struct {
	backend.Unsupported // no release announcements, no hand-off notices
	mem                 *memory.Backend
	frozen              atomic.Bool
}

func (s *shardedStore) Shard(key string) string { return key[:1] }
func (s *shardedStore) Close() error            { return nil }

func (s *shardedStore) Info() backend.Info {
	return backend.Info{Name: "memory", ProcessLocal: true, Queue: true, Batches: true, Sharded: true}
}

func (s *shardedStore) Inspect(ctx context.Context, key string) (backend.Holder, bool, error) {
	return s.mem.Inspect(ctx, key)
}

func (s *shardedStore) Holders(ctx context.Context, key string) ([]backend.Holder, error) {
	return s.mem.Holders(ctx, key)
}

func (s *shardedStore) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	return s.mem.List(ctx, prefix, fn)
}

func (s *shardedStore) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	return s.mem.Revoke(ctx, key, token)
}

// stall waits for ctx when a round trip on keys would reach the frozen shard.
func (s *shardedStore) stall(ctx context.Context, keys ...string) error {
	if !s.frozen.Load() {
		return nil
	}
	for _, k := range keys {
		if s.Shard(k) == "f" {
			<-ctx.Done()
			return ctx.Err()
		}
	}
	return nil
}

func (s *shardedStore) Acquire(ctx context.Context, r backend.AcquireRequest) (backend.Grant, error) {
	if err := s.stall(ctx, r.Key); err != nil {
		return backend.Grant{}, err
	}
	return s.mem.Acquire(ctx, r)
}

func (s *shardedStore) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if err := s.stall(ctx, r.Key); err != nil {
		return backend.Grant{}, err
	}
	return s.mem.Renew(ctx, r)
}

func (s *shardedStore) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := s.stall(ctx, r.Key); err != nil {
		return err
	}
	return s.mem.Release(ctx, r)
}

func (s *shardedStore) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	keys := make([]string, len(rs))
	for i, r := range rs {
		keys[i] = r.Key
	}
	if err := s.stall(ctx, keys...); err != nil {
		return nil, err
	}
	out := make([]backend.RenewResult, len(rs))
	for i, r := range rs {
		out[i].Grant, out[i].Err = s.mem.Renew(ctx, r)
	}
	return out, nil
}

func (s *shardedStore) Batch(ctx context.Context, calls []backend.Call) {
	keys := make([]string, len(calls))
	for i, c := range calls {
		keys[i] = map[backend.Op]string{backend.OpAcquire: c.Acquire.Key, backend.OpRenew: c.Renew.Key, backend.OpRelease: c.Release.Key}[c.Op]
	}
	if err := s.stall(ctx, keys...); err != nil {
		for i := range calls {
			calls[i].Err = err
		}
		return
	}
	for i := range calls {
		c := &calls[i]
		switch c.Op {
		case backend.OpAcquire:
			c.Grant, c.Err = s.mem.Acquire(ctx, c.Acquire)
		case backend.OpRenew:
			c.Grant, c.Err = s.mem.Renew(ctx, c.Renew)
		case backend.OpRelease:
			c.Err = s.mem.Release(ctx, c.Release)
		}
	}
}

// A shard that stops answering costs only its own leases: the engine never
// puts two shards' renewals in one round trip and gives each shard calls of
// its own, so the other shard's leases are renewed on time, in batches
// (RenewBatch) and alone (Renew). It used
// to answer a renewal batch only when all of it had returned, at the frozen
// shard's deadline, after the live leases' own.
func TestFrozenShardCostsOnlyItsOwnLeases(t *testing.T) {
	for _, size := range []int{500, 1} {
		t.Run("batches of "+strconv.Itoa(size), func(t *testing.T) {
			s := &shardedStore{mem: memory.New()}
			w := &renewWatch{Backend: backend.Wrap(s, backend.Middleware{}), started: make(chan struct{}, 1)}
			m, err := leasehold.New(w, leasehold.WithRenewBatching(size, 0))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close(context.Background()) })
			sub := m.Subscribe(64)
			defer sub.Close()

			const ttl = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			leases := map[string]*leasehold.Lease{}
			for i := range 8 {
				for _, shard := range []string{"f", "l"} {
					name := shard + "-" + strconv.Itoa(i)
					l, err := m.Acquire(ctx, name, leasehold.WithTTL(ttl))
					if err != nil {
						t.Fatal(err)
					}
					leases[name] = l
				}
			}
			frozenAt := map[string]time.Time{}
			for name, l := range leases {
				frozenAt[name] = l.ExpiresAt()
			}
			s.frozen.Store(true)
			t.Cleanup(func() { s.frozen.Store(false) })

			for lost := 0; lost < 8; lost++ {
				select {
				case ev := <-sub.Events():
					if ev.Name[:1] != "f" {
						t.Fatalf("%q, on the live shard, was lost: %v", ev.Name, ev.Err)
					}
				case <-time.After(10 * ttl):
					t.Fatalf("%d of the frozen shard's 8 leases lost within %v", lost, 10*ttl)
				}
			}
			// A lease's ExpiresAt moves only as a renewal's answer is
			// applied, and a renewal call follows each (renewWatch): wait
			// for those.
			deadline := time.Now().Add(10 * ttl)
			for name, l := range leases {
				if name[:1] == "f" {
					continue
				}
				for !l.ExpiresAt().After(frozenAt[name].Add(ttl)) {
					if err := l.Err(); err != nil {
						t.Fatalf("%q, on the live shard: %v", name, err)
					}
					select {
					case <-w.started:
					case <-time.After(time.Until(deadline)):
						if err := l.Err(); err != nil {
							t.Fatalf("%q, on the live shard: %v", name, err)
						}
						t.Fatalf("%q, on the live shard, was not renewed past %v", name, frozenAt[name].Add(ttl))
					}
				}
			}
		})
	}
}
