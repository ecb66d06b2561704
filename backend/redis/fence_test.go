package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/fencetest"
)

// fenceGuard writes each resource's value to "{prefix+resource}:value"
// under the fence of prefix+resource, and reports errors with the
// resource's name as the suite gave it.
type fenceGuard struct {
	c      goredis.UniversalClient
	prefix string
	store  bool // through FenceStore then a plain SET, not guarded by the script
}

func newFenceGuard(t *testing.T, c goredis.UniversalClient) *fenceGuard {
	g := &fenceGuard{c: c, prefix: testPrefix(t)}
	t.Cleanup(func() {
		deletePrefix(c, "leasehold:fence:{"+g.prefix)
		deletePrefix(c, "{"+g.prefix)
	})
	return g
}

func (g *fenceGuard) key(resource string) string { return "{" + g.prefix + resource + "}:value" }

func (g *fenceGuard) Write(ctx context.Context, resource string, token uint64, value string) error {
	r := resource
	if r != "" {
		r = g.prefix + resource
	}
	err := Fenced(g.c, r).Set(ctx, token, g.key(resource), value, time.Hour)
	var se *leasehold.StaleTokenError
	if errors.As(err, &se) {
		se.Resource = resource
	}
	return err
}

func (g *fenceGuard) Read(ctx context.Context, resource string) (string, error) {
	v, err := g.c.Get(ctx, g.key(resource)).Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	return v, err
}

func TestFenceConformance(t *testing.T) {
	c := redistest.Client(t)
	fencetest.Run(t, func(t *testing.T) fencetest.Guard { return newFenceGuard(t, c) })
}

func TestFenceStoreConformance(t *testing.T) {
	c := redistest.Client(t)
	fencetest.Run(t, func(t *testing.T) fencetest.Guard {
		prefix := testPrefix(t)
		t.Cleanup(func() { deletePrefix(c, "leasehold:fence:{"+prefix) })
		return fencetest.StoreGuard(prefixed{FenceStore(c), prefix})
	})
}

// prefixed keeps a test's resources apart from others' on the shared server.
type prefixed struct {
	fence.Store
	prefix string
}

func (p prefixed) Check(ctx context.Context, resource string, token uint64) error {
	r := resource
	if r != "" {
		r = p.prefix + resource
	}
	err := p.Store.Check(ctx, r, token)
	var se *leasehold.StaleTokenError
	if errors.As(err, &se) {
		se.Resource = resource
	}
	return err
}

// Tokens compare as numbers, not as strings, over the whole uint64 range.
func TestFenceComparesTokensAsNumbers(t *testing.T) {
	c := redistest.Client(t)
	g := newFenceGuard(t, c)
	ctx := ctxT(t)
	for _, tok := range []uint64{9, 10, 99, 100, 1<<53 + 1, 1<<64 - 2, 1<<64 - 1} {
		if err := g.Write(ctx, "r", tok, "v"); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	err := g.Write(ctx, "r", 1<<64-2, "v")
	var se *leasehold.StaleTokenError
	if !errors.As(err, &se) || se.Highest != 1<<64-1 {
		t.Fatalf("token 2^64-2 after 2^64-1: %v", err)
	}
}

func TestFenceHSetAndDel(t *testing.T) {
	c := redistest.Client(t)
	g := newFenceGuard(t, c)
	ctx := ctxT(t)
	r := g.prefix + "r"
	h, other := "{"+r+"}:hash", "{"+r+"}:other"
	f := Fenced(c, r)
	if err := f.HSet(ctx, 5, h, "a", "1", "b", "2"); err != nil {
		t.Fatal(err)
	}
	if got := c.HGetAll(ctx, h).Val(); got["a"] != "1" || got["b"] != "2" {
		t.Fatalf("hash %v", got)
	}
	if err := f.HSet(ctx, 4, h, "a", "stale"); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("stale HSet: %v", err)
	}
	if err := f.Set(ctx, 5, other, "x", 0); err != nil {
		t.Fatal(err)
	}
	if c.TTL(ctx, other).Val() != -1 {
		t.Fatal("Set with ttl 0 left a TTL")
	}
	if err := f.Del(ctx, 3, h, other); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("stale Del: %v", err)
	}
	if n := c.Exists(ctx, h, other).Val(); n != 2 {
		t.Fatalf("a stale Del deleted keys: %d left", n)
	}
	if err := f.Del(ctx, 6, h, other); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, h, other).Val(); n != 0 {
		t.Fatalf("Del left %d keys", n)
	}
	for name, err := range map[string]error{
		"odd HSet":     f.HSet(ctx, 7, h, "a"),
		"empty Del":    f.Del(ctx, 7),
		"bad ttl":      f.Set(ctx, 7, other, "x", time.Microsecond),
		"fence key":    f.Set(ctx, 7, FenceKey(r), "x", 0),
		"empty key":    f.Set(ctx, 7, "", "x", 0),
		"zero token":   f.Set(ctx, 0, other, "x", 0),
		"empty fenced": Fenced(c, "").Set(ctx, 7, other, "x", 0),
	} {
		if !errors.Is(err, fence.ErrInvalidFence) {
			t.Errorf("%s: %v, want ErrInvalidFence", name, err)
		}
	}
	if c.Exists(ctx, other).Val() != 0 || c.Get(ctx, FenceKey(r)).Val() != "6" {
		t.Fatal("a refused call changed something")
	}
}

func TestHashSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            12739, // CRC16/XMODEM's check value, 0x31C3
		"foo":                  12182,
		"{user1000}.following": hashSlot("user1000"),
		"foo{}{bar}":           hashSlot("foo{}{bar}"),
	} {
		if got := hashSlot(key); got != want {
			t.Errorf("hashSlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// On Cluster a key off the fence's slot is refused before anything is sent,
// and a tagged key is written.
func TestFenceOnCluster(t *testing.T) {
	s, cc := startOneNodeCluster(t)
	ctx := ctxT(t)
	admin := redistest.NewClient(t, s.Addr())
	for _, k := range []string{"123456789", "{invoices}:total", FenceKey("invoices")} {
		if want := admin.ClusterKeySlot(ctx, k).Val(); int64(hashSlot(k)) != want {
			t.Errorf("hashSlot(%q) = %d, the server says %d", k, hashSlot(k), want)
		}
	}
	f := Fenced(cc, "invoices")
	if err := f.Set(ctx, 1, "total", "1", 0); !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("untagged key on Cluster: %v, want ErrCrossSlot", err)
	}
	if admin.Exists(ctx, "total", FenceKey("invoices")).Val() != 0 {
		t.Fatal("the refused write changed something")
	}
	if err := f.Set(ctx, 1, "{invoices}:total", "1", 0); err != nil {
		t.Fatalf("tagged key on Cluster: %v", err)
	}
}
