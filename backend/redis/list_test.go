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
