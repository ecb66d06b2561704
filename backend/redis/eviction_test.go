package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// Scenario 9: New refuses a server whose maxmemory-policy may evict leases,
// naming the policy, unless WithEvictionAllowed accepts the risk.
func TestNewRefusesEvictingPolicies(t *testing.T) {
	s := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
	c := redistest.NewClient(t, s.Addr())
	ctx := ctxT(t)

	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"} {
		if err := c.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := New(c)
		if !errors.Is(err, ErrEvictionPolicy) {
			t.Fatalf("%s: New = %v, want ErrEvictionPolicy", policy, err)
		}
		for _, want := range []string{strconv.Quote(policy), s.Addr(), "noeviction", "WithEvictionAllowed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not mention %s", policy, err, want)
			}
		}
		if _, err := NewContext(ctx, c, WithEvictionAllowed()); err != nil {
			t.Fatalf("%s: New with WithEvictionAllowed: %v", policy, err)
		}
	}

	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	b, err := NewContext(ctx, c, WithKeyPrefix(testPrefix(t)))
	if err != nil {
		t.Fatalf("noeviction: %v", err)
	}
	closeAtEnd(t, b)
	mustAcquire(t, b, "k", "alice", time.Minute)

	// The check runs under the caller's context.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := NewContext(ended, c); !errors.Is(err, context.Canceled) || errors.Is(err, ErrEvictionPolicy) {
		t.Fatalf("NewContext with an ended context: %v", err)
	}
}

// A server that will not tell its policy (CONFIG renamed away, or an ACL
// without +config) is refused too, and the error says how to go on.
func TestNewRefusesWhenThePolicyCannotBeRead(t *testing.T) {
	renamed := redistest.Start(t, "--rename-command", "CONFIG", "")
	s := redistest.Start(t)
	admin := redistest.NewClient(t, s.Addr())
	ctx := ctxT(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "leaser", "on", ">s3cr3t-pa55", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	noPerm := goredis.NewClient(&goredis.Options{Addr: s.Addr(), Username: "leaser", Password: "s3cr3t-pa55", MaxRetries: -1})
	t.Cleanup(func() { _ = noPerm.Close() })

	for name, c := range map[string]*goredis.Client{
		"CONFIG renamed": redistest.NewClient(t, renamed.Addr()),
		"no +config":     noPerm,
	} {
		_, err := New(c)
		if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "WithEvictionAllowed") {
			t.Fatalf("%s: New = %v, want ErrEvictionPolicy naming WithEvictionAllowed", name, err)
		}
		if strings.Contains(err.Error(), "s3cr3t-pa55") {
			t.Fatalf("%s: error leaks the password: %v", name, err)
		}
		b, err := New(c, WithEvictionAllowed(), WithKeyPrefix(testPrefix(t)))
		if err != nil {
			t.Fatalf("%s: New with WithEvictionAllowed: %v", name, err)
		}
		closeAtEnd(t, b)
		mustAcquire(t, b, "k", "alice", time.Minute)
	}
}

// Why New checks: under memory pressure an allkeys-* policy evicts a record
// (the filler is newer) and frees a held name while its holder works; the
// clock keeps the next token above the lost counter. A volatile-* policy
// leaves records alone (they have no TTL) but evicts what has one: here a
// holding in the older layout, as an older version wrote it during an
// upgrade. With WithEvictionAllowed that risk is the caller's.
func TestEvictionFreesAHeldName(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			s := redistest.Start(t, "--maxmemory-policy", policy)
			c := redistest.NewClient(t, s.Addr())
			ctx := ctxT(t)
			b := newTestBackend(t, c, WithEvictionAllowed())
			alice := mustAcquire(t, b, "k", "alice", time.Hour)
			old := b.LeaseKey("old")
			if err := c.HSet(ctx, old, "owner", "carol", "attempt", "c-1", "token", "7", "meta", "").Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.PExpire(ctx, old, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}

			used, err := c.InfoMap(ctx, "memory").Result()
			if err != nil {
				t.Fatal(err)
			}
			base, _ := strconv.ParseInt(used["Memory"]["used_memory"], 10, 64)
			if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(base+2<<20, 10)).Err(); err != nil {
				t.Fatal(err)
			}
			// Fill until Redis has nothing left to evict and refuses writes,
			// or (allkeys) has evicted the record.
			filler := strings.Repeat("x", 64<<10)
			oom := false
			for i := 0; i < 1000 && !oom && c.Exists(ctx, b.LeaseKey("k")).Val() == 1; i++ {
				err := c.Set(ctx, "filler:"+strconv.Itoa(i), filler, 0).Err()
				if err != nil {
					if !strings.HasPrefix(err.Error(), "OOM") {
						t.Fatal(err)
					}
					oom = true
				}
			}
			if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			if policy == "volatile-ttl" {
				if !oom {
					t.Fatal("never ran out of memory")
				}
				if c.Exists(ctx, old).Val() != 0 {
					t.Fatal("the older layout's holding survived: nothing was evicted")
				}
				mustHolder(t, b, "k", "alice")
				return
			}
			if n := c.Exists(ctx, b.LeaseKey("k")).Val(); n != 0 {
				t.Fatal("the record survived: nothing was evicted")
			}
			bob := mustAcquire(t, b, "k", "bob", time.Minute)
			if bob.Token <= alice.Token {
				t.Fatalf("token %d after %d", bob.Token, alice.Token)
			}
			if _, err := b.Renew(ctx, alice.renew(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
				t.Fatalf("alice's renewal after the eviction: %v", err)
			}
		})
	}
}
