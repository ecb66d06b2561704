package redis

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// List matches its prefix literally (glob characters, braces and the escape
// character included), reads more than one page, survives an emptied script
// cache, and gives the names back as they were granted.
func TestListAwkwardPrefixAcrossPages(t *testing.T) {
	s := redistest.Start(t) // its own server: the test empties the script cache
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)

	const prefix = `p*?[x]\{y}%7B-`
	want := map[string]uint64{}
	for i := range listPage + 20 {
		k := prefix + itoa(i)
		want[k] = mustAcquire(t, b, k, "alice", time.Minute).Token
	}
	// Names a glob or an unescaped prefix would also match.
	for _, k := range []string{`pZ?[x]\{y}%7B-1`, `p*?x\{y}%7B-1`, `p*?[x]\{y}{-1`, `p*?[x]\{y}%257B-1`} {
		mustAcquire(t, b, k, "bob", time.Minute)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	got := map[string]uint64{}
	err := b.List(ctx, prefix, func(h backend.Holder) bool {
		if h.Owner != "alice" || h.ExpiresIn <= 0 {
			t.Errorf("listed %+v", h)
		}
		got[h.Key] = h.Token
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d holdings, want %d", len(got), len(want))
	}
	for k, tok := range want {
		if got[k] != tok {
			t.Fatalf("%q listed with token %d, want %d", k, got[k], tok)
		}
	}
}

// Records stay when their names are free: List and Inspect leave out a
// released record, a revoked one and one whose holding expired, and report
// only the live holdings beside them.
func TestListLeavesOutFreeRecords(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	released := mustAcquire(t, b, "released", "alice", time.Minute)
	if err := b.Release(ctx, released.release()); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, "revoked", "alice", time.Minute)
	if _, removed, err := b.Revoke(ctx, "revoked", 0); err != nil || !removed {
		t.Fatalf("Revoke: %v, %v", removed, err)
	}
	mustAcquire(t, b, "expired", "alice", time.Minute)
	expireIn(t, c, b, "expired", 0)
	live := mustAcquire(t, b, "live", "bob", time.Minute)
	for _, k := range []string{"released", "revoked", "expired"} {
		if c.Exists(ctx, b.LeaseKey(k)).Val() != 1 {
			t.Fatalf("%s: no record left: the scene is wrong", k)
		}
		mustHolder(t, b, k, "")
	}
	var listed []backend.Holder
	if err := b.List(ctx, "", func(h backend.Holder) bool { listed = append(listed, h); return true }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Key != "live" || listed[0].Token != live.Token {
		t.Fatalf("List = %+v, want only bob's live holding", listed)
	}
}
