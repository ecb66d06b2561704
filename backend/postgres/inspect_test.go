package postgres

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/backend"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		prefix, end string
		bounded     bool
	}{
		{"", "", false},
		{"a", "b", true},
		{"job/", "job0", true},
		{"%", "&", true},
		{"é", "ê", true},
		{"x\U0010FFFF", "y", true},
		{"\U0010FFFF\U0010FFFF", "", false},
		{"a\uD7FF", "a\uE000", true},
	} {
		end, bounded := prefixEnd(c.prefix)
		if end != c.end || bounded != c.bounded {
			t.Errorf("prefixEnd(%q) = %q, %v; want %q, %v", c.prefix, end, bounded, c.end, c.bounded)
		}
		if bounded && (!utf8.ValidString(end) || end <= c.prefix) {
			t.Errorf("prefixEnd(%q) = %q is not a valid string above the prefix", c.prefix, end)
		}
	}
}

// List pages through the key range of the prefix: LIKE and regular
// expression syntax in a prefix is data, multi-byte and maximal code points
// bound the range correctly, expired holdings are left out, and fn can stop
// it.
func TestListByPrefixInPages(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	b.listPage = 2
	ctx := ctxT(t)
	keys := []string{
		"a%", "a%b", "a%c/d", "a_", "ab", "a\\", "a\\x", "é", "é1", "ê",
		"z\U0010FFFF", "z\U0010FFFFq", "zz",
	}
	tokens := map[string]uint64{}
	for _, k := range keys {
		tokens[k] = mustAcquire(t, b, k, "a", live).Token
	}
	expired := mustAcquire(t, b, "a%expired", "a", 20*time.Millisecond)
	waitPast(t, e.admin, expired.ExpiresAt)

	list := func(prefix string) []string {
		t.Helper()
		var got []string
		if err := b.List(ctx, prefix, func(h backend.Holder) bool {
			if h.Token != tokens[h.Key] || h.Owner != "a" || h.ExpiresIn <= 0 {
				t.Errorf("List(%q): %+v, want a's holding with token %d", prefix, h, tokens[h.Key])
			}
			got = append(got, h.Key)
			return true
		}); err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		return got
	}
	for prefix, want := range map[string]string{
		"a%":          "a%,a%b,a%c/d",
		"a_":          "a_",
		"a\\":         "a\\,a\\x",
		"é":           "é,é1",
		"z\U0010FFFF": "z\U0010FFFF,z\U0010FFFFq",
		"":            strings.Join(slices.Sorted(slices.Values(keys)), ","), // byte order, as the "C" collation,
		"nothing":     "",
	} {
		if got := strings.Join(list(prefix), ","); got != want {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	n := 0
	if err := b.List(ctx, "", func(backend.Holder) bool { n++; return n < 3 }); err != nil || n != 3 {
		t.Errorf("List stopped by fn after %d calls (%v), want 3", n, err)
	}
	for _, bad := range []string{"a\x00", "\xff"} {
		if err := b.List(ctx, bad, func(backend.Holder) bool { return true }); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("List(%q) = %v, want ErrInvalidRequest", bad, err)
		}
	}
}

// Inspect sees the live holding with the time it has left on the server's
// clock; Revoke removes it, announces it like a release, fences the holder
// and never brings its token back.
func TestInspectAndRevoke(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t, WithSweep(0, 0))
	ctx := ctxT(t)
	keys, listening, _ := watching(t, b)
	await(t, listening, "LISTEN")

	if _, held, err := b.Inspect(ctx, "k"); err != nil || held {
		t.Fatalf("Inspect of a free key = held %v, %v", held, err)
	}
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "a", Attempt: "t1", TTL: live, Metadata: "md"})
	if err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	h := held{Grant: g, key: "k", owner: "a", attempt: "t1"}
	before := serverNow(t, e)
	in, ok, err := b.Inspect(ctx, "k")
	after := serverNow(t, e)
	if err != nil || !ok || in.Key != "k" || in.Owner != "a" || in.Token != g.Token || in.Metadata != "md" || !in.ExpiresAt.Equal(g.ExpiresAt) {
		t.Fatalf("Inspect = %+v, %v, %v; want a's holding", in, ok, err)
	}
	if at := in.ExpiresAt.Add(-in.ExpiresIn); at.Before(before) || at.After(after) {
		t.Errorf("Inspect: ExpiresIn %v puts the answer at %v, outside [%v, %v]", in.ExpiresIn, at, before, after)
	}
	if _, _, err := b.Inspect(ctx, "k\x00"); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Inspect of a bad key = %v", err)
	}

	if _, removed, err := b.Revoke(ctx, "k", g.Token+1); err != nil || removed {
		t.Fatalf("Revoke with another token: removed %v, %v", removed, err)
	}
	markWaited(t, b, "k")
	rv, removed, err := b.Revoke(ctx, "k", g.Token)
	if err != nil || !removed || rv.Owner != "a" || rv.Token != g.Token || rv.Metadata != "md" {
		t.Fatalf("Revoke = %+v, %v, %v", rv, removed, err)
	}
	if k := await(t, keys, "the revoke's notification"); k != "k" {
		t.Fatalf("watch reported %q, want k", k)
	}
	if _, err := b.Renew(ctx, h.renewReq(live)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("the revoked holder's renewal = %v, want ErrNotHeld", err)
	}
	if g2 := acquireAs(t, b, "k", "a", "t1", live); !g2.Acquired || g2.Token <= g.Token {
		t.Errorf("the revoked attempt's retry = %+v, want a new grant above %d", g2.Grant, g.Token)
	}

	short := mustAcquire(t, b, "short", "a", 20*time.Millisecond)
	waitPast(t, e.admin, short.ExpiresAt)
	if _, removed, err := b.Revoke(ctx, "short", 0); err != nil || removed {
		t.Errorf("Revoke of an expired holding: removed %v, %v", removed, err)
	}
	if _, held, err := b.Inspect(ctx, "short"); err != nil || held {
		t.Errorf("Inspect of an expired holding: held %v, %v", held, err)
	}
	if _, _, err := b.Revoke(ctx, "", 0); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Revoke of an empty key = %v", err)
	}
}
