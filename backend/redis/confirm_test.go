package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// startReplicated starts a primary and one replica of it, and waits until the
// replica is in sync.
func startReplicated(t *testing.T) (primary, replica *redistest.Server) {
	t.Helper()
	// No diskless-sync delay: the replica's first sync starts at once.
	primary = redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica = redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()))
	c := redistest.NewClient(t, primary.Addr())
	// WAIT is the signal: it returns once the replica acknowledged.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		n, err := c.Do(ctx, "WAIT", 1, 1000).Int64()
		if err != nil {
			t.Fatalf("waiting for the replica: %v", err)
		}
		if n >= 1 {
			return primary, replica
		}
	}
}

func TestReplicaConfirmation(t *testing.T) {
	primary, replica := startReplicated(t)
	c := redistest.NewClient(t, primary.Addr())
	rc := redistest.NewClient(t, replica.Addr())
	ctx := ctxT(t)

	// Generous: a loaded machine may take a while to acknowledge (and still
	// below the client's 5 s read timeout).
	b := newTestBackend(t, c, WithReplicaConfirmation(1, 4*time.Second))
	g := mustAcquire(t, b, "k", "alice", time.Minute)
	// Confirmed means the replica has it: a failover to it keeps the lease.
	if got := rc.HGet(ctx, b.LeaseKey("k"), "owner").Val(); got != "alice" {
		t.Fatalf("replica shows owner %q after a confirmed grant", got)
	}
	r, err := b.Renew(ctx, g.renew(time.Minute))
	if err != nil || r.Token != g.Token {
		t.Fatalf("confirmed renew: %+v %v", r, err)
	}
	// With the script cache emptied, the pipelined EVALSHA meets NOSCRIPT and
	// falls back to EVAL.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Renew(ctx, g.renew(time.Minute)); err != nil {
		t.Fatalf("confirmed renew after SCRIPT FLUSH: %v", err)
	}

	// Asking for more replicas than exist: the grant is never confirmed,
	// so it is given back and reported as a fault.
	greedy, err := New(c, WithKeyPrefix(b.cfg.prefix), WithReplicaConfirmation(2, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, greedy)
	ng, err := greedy.Acquire(ctx, backend.AcquireRequest{Key: "other", Owner: "bob", Attempt: newAttempt(), TTL: time.Minute})
	if !errors.Is(err, ErrNotConfirmed) || ng.Acquired {
		t.Fatalf("unconfirmed acquire = %+v, %v; want ErrNotConfirmed", ng, err)
	}
	if isHeld(t, c, b, "other") {
		t.Fatal("an unconfirmed grant was left behind")
	}
	// An unconfirmed renewal fails (the engine keeps retrying, then loses).
	if _, err := greedy.Renew(ctx, g.renew(time.Minute)); !errors.Is(err, ErrNotConfirmed) || isNotHeld(err) {
		t.Fatalf("unconfirmed renew: %v", err)
	}

	// The replica dies: nothing can be confirmed any more.
	replica.Kill()
	b, err = New(c, WithKeyPrefix(b.cfg.prefix), WithReplicaConfirmation(1, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b)
	ng, err = b.Acquire(ctx, backend.AcquireRequest{Key: "third", Owner: "carol", Attempt: newAttempt(), TTL: time.Minute})
	if !errors.Is(err, ErrNotConfirmed) || ng.Acquired {
		t.Fatalf("acquire with the replica down = %+v, %v; want ErrNotConfirmed", ng, err)
	}
	if isHeld(t, c, b, "third") {
		t.Fatal("an unconfirmed grant was left behind")
	}
	if _, err := b.Renew(ctx, g.renew(time.Minute)); !errors.Is(err, ErrNotConfirmed) {
		t.Fatalf("renew with the replica down: %v", err)
	}
}

// With replica confirmation on and the replica gone, a grant nobody
// confirmed is given back and Acquire reports a backend fault wrapping
// ErrNotConfirmed, with or without a wait: never ErrNotAcquired, which would
// say that someone holds the name (it named no holder). The name is left
// free, and the Manager can take it once a replica is back.
func TestManagerUnconfirmedGrantIsAFault(t *testing.T) {
	primary, replica := startReplicated(t)
	c := redistest.NewClient(t, primary.Addr())
	b := newTestBackend(t, c, WithReplicaConfirmation(1, 200*time.Millisecond))
	m := newManager(t, b, "alice")
	replica.Kill()
	for _, opts := range [][]leasehold.AcquireOption{nil, {leasehold.WithWait(time.Minute)}} {
		l, err := m.Acquire(ctxT(t), "job", opts...)
		if errors.Is(err, leasehold.ErrNotAcquired) || !errors.Is(err, ErrNotConfirmed) {
			t.Fatalf("Acquire (%d options) with the replica gone = %v, %v; want a fault wrapping ErrNotConfirmed, not ErrNotAcquired", len(opts), l, err)
		}
		if isHeld(t, c, b, "job") {
			t.Fatal("an unconfirmed grant was left behind")
		}
	}
}

// A Ring is refused, with or without replica confirmation: it moves a down
// shard's keys to the others (two holders of one name) and loads scripts on
// one shard only (its acquires failed with NOSCRIPT).
func TestNewRefusesARing(t *testing.T) {
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, opts := range [][]Option{{WithReplicaConfirmation(1, time.Second)}, {WithEvictionAllowed()}} {
		_, err := New(ring, opts...)
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "*redis.Ring") {
			t.Errorf("New(ring) = %v, want ErrInvalidOption naming the Ring", err)
		}
	}
}
