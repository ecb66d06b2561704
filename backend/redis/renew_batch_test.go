package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

func TestRenewBatch(t *testing.T) {
	s := redistest.Start(t) // its own server: the test empties the script cache
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	// Long TTLs: a renewal must find them live however loaded the machine.
	g1 := mustAcquire(t, b, "one", "alice", 10*time.Second)
	g2 := mustAcquire(t, b, "two {x}", "alice", 10*time.Second)
	gb := mustAcquire(t, b, "bob's", "bob", 10*time.Second)

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	otherAttempt := g1.renew(time.Minute)
	otherAttempt.Attempt = newAttempt()
	stale := g1.renew(time.Minute)
	stale.Token++
	reqs := []backend.RenewRequest{
		g1.renew(time.Minute),
		{Key: "bob's", Owner: "alice", Attempt: gb.attempt, Token: gb.Token, TTL: time.Minute}, // not hers
		{Key: "", Owner: "alice", Attempt: g1.attempt, Token: 1, TTL: time.Minute},             // invalid
		g2.renew(time.Minute),
		stale,
		{Key: "gone", Owner: "alice", Attempt: g1.attempt, Token: 7, TTL: time.Minute},
		otherAttempt, // alice's, but another attempt's
	}
	res, err := b.RenewBatch(ctx, reqs)
	if err != nil {
		t.Fatalf("RenewBatch: %v", err)
	}
	if len(res) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(res), len(reqs))
	}
	for _, i := range []int{0, 3} {
		if res[i].Err != nil || !res[i].Grant.Acquired || res[i].Grant.Token != reqs[i].Token {
			t.Errorf("result %d = %+v", i, res[i])
		}
		if left := holdingTTL(t, c, b, reqs[i].Key); left < 50*time.Second {
			t.Errorf("%q not extended: %v left", reqs[i].Key, left)
		}
	}
	for _, i := range []int{1, 4, 5, 6} {
		if !isNotHeld(res[i].Err) {
			t.Errorf("result %d: %v, want ErrNotHeld", i, res[i].Err)
		}
	}
	if !errors.Is(res[2].Err, backend.ErrInvalidRequest) {
		t.Errorf("invalid request: %v", res[2].Err)
	}
	if left := holdingTTL(t, c, b, "bob's"); left > 10*time.Second {
		t.Errorf("bob's lease was extended by alice: %v left", left)
	}

	if res, err := b.RenewBatch(ctx, nil); err != nil || len(res) != 0 {
		t.Errorf("empty batch: %v, %v", res, err)
	}
}

// A batch that cannot be confirmed fails as a whole: no result may pass for
// a renewal.
func TestRenewBatchFaultFailsWholeBatch(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	b := newTestBackend(t, redistest.NewClient(t, p.Addr()))
	g := mustAcquire(t, b, "k", "alice", time.Minute)
	reqs := []backend.RenewRequest{g.renew(time.Minute)}

	p.DropReplies(true)
	res, err := b.RenewBatch(ctxT(t), reqs)
	if err == nil || res != nil {
		t.Fatalf("batch with its reply lost = %v, %v; want no results and a fault", res, err)
	}
	p.DropReplies(false)

	p.Blackhole(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if res, err := b.RenewBatch(ctx, reqs); err == nil || res != nil {
		t.Fatalf("batch through a dead link = %v, %v", res, err)
	}
	p.Blackhole(false)
	p.CutAll()
	if res, err := b.RenewBatch(ctxT(t), reqs); err != nil || res[0].Err != nil {
		t.Fatalf("batch once the link is back: %v, %v", res, err)
	}
}

func TestRenewBatchWithReplicaConfirmation(t *testing.T) {
	primary, replica := startReplicated(t)
	c := redistest.NewClient(t, primary.Addr())
	// Generous: a loaded machine may take a while to acknowledge.
	b := newTestBackend(t, c, WithReplicaConfirmation(1, 4*time.Second))
	g := mustAcquire(t, b, "k", "alice", time.Minute)
	reqs := []backend.RenewRequest{
		g.renew(time.Minute),
		{Key: "gone", Owner: "alice", Attempt: g.attempt, Token: 1, TTL: time.Minute},
	}
	res, err := b.RenewBatch(ctxT(t), reqs)
	if err != nil || res[0].Err != nil || !isNotHeld(res[1].Err) {
		t.Fatalf("confirmed batch: %v, %v", res, err)
	}
	replica.Kill()
	// Nothing can be confirmed now: a short timeout says so sooner.
	b, err = New(c, WithKeyPrefix(b.cfg.prefix), WithReplicaConfirmation(1, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b)
	res, err = b.RenewBatch(ctxT(t), reqs)
	if err != nil || !errors.Is(res[0].Err, ErrNotConfirmed) || !isNotHeld(res[1].Err) {
		t.Fatalf("batch with the replica down: %v, %v", res, err)
	}
}
