package redis

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// awkwardKeys must round-trip exactly and never collide, also with each other
// once escaped.
var awkwardKeys = []string{
	"plain",
	"with space",
	" leading and trailing ",
	"line\nbreak",
	"tab\tand\r\nCRLF",
	`quotes " and ' and \`,
	"{braces}",
	"{",
	"}",
	"}{",
	"a{b}c",
	"%7B",   // the escape of "{" must not collide with "{"
	"%257B", // nor the escape of that
	"%",
	"glob*?[a-z]^!",
	"*",
	"prefix:lease",
	"emoji 🔒 and ünïcödé",
	strings.Repeat("é", backend.MaxKeyRunes),
	strings.Repeat("🔒", backend.MaxKeyRunes),
}

func TestHashTagIsInjectiveAndBraceFree(t *testing.T) {
	seen := map[string]string{}
	for _, k := range awkwardKeys {
		tag := hashTag(k)
		inner := tag[1 : len(tag)-1]
		if strings.ContainsAny(inner, "{}") {
			t.Errorf("hash tag of %q contains a brace: %q", k, tag)
		}
		if other, dup := seen[tag]; dup {
			t.Errorf("%q and %q share the hash tag %q", k, other, tag)
		}
		seen[tag] = k
	}
}

func TestAwkwardKeysRoundTripAndNeverCollide(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	grants := map[string]holding{}
	for i, k := range awkwardKeys {
		// The owner is awkward too, and metadata at its limit.
		owner := awkwardKeys[len(awkwardKeys)-1-i]
		meta := strings.Repeat("m", backend.MaxMetadataBytes)
		attempt := newAttempt()
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: owner, Attempt: attempt, TTL: time.Minute, Metadata: meta})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire(%q): %+v %v", k, g, err)
		}
		grants[k] = holding{Grant: g, key: k, owner: owner, attempt: attempt}
		got := c.HGetAll(ctx, b.LeaseKey(k)).Val()
		if got["owner"] != owner || got["meta"] != meta {
			t.Fatalf("stored owner %q (want %q), meta %d bytes", got["owner"], owner, len(got["meta"]))
		}
	}
	// Every key is still held by its own owner: nothing overwrote anything.
	for i, k := range awkwardKeys {
		owner := awkwardKeys[len(awkwardKeys)-1-i]
		busy, err := b.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: "intruder", Attempt: newAttempt(), TTL: time.Second})
		if err != nil || busy.Acquired || busy.Holder != owner {
			t.Fatalf("Acquire(%q) by intruder: %+v %v (want holder %q)", k, busy, err, owner)
		}
		if _, err := b.Renew(ctx, grants[k].renew(time.Minute)); err != nil {
			t.Fatalf("Renew(%q): %v", k, err)
		}
	}
	// Both keys of a name hash to one Cluster slot: Cluster hashes only what
	// is between the first "{" and the next "}", and that is the same.
	for _, k := range awkwardKeys {
		t1, t2 := clusterTag(b.LeaseKey(k)), clusterTag(b.TokenKey(k))
		if t1 == "" || t1 != t2 || t1 != tagEscaper.Replace(k) {
			t.Fatalf("%q: lease tag %q, token tag %q", k, t1, t2)
		}
		q, e := b.QueueKeys(k)
		all := b.keysOf(k)
		if want := []string{b.LeaseKey(k), b.TokenKey(k), q, e}; !slices.Equal(all, want) {
			t.Fatalf("%q: the scripts' keys %q, want %q", k, all, want)
		}
		if q != b.cfg.prefix+"{"+t1+"}:queue" || e != b.cfg.prefix+"{"+t1+"}:entries" {
			t.Fatalf("%q: queue keys %q, %q", k, q, e)
		}
	}
}

// clusterTag is the part of key Redis Cluster hashes, by its documented rule.
func clusterTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return ""
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return ""
	}
	return key[open+1 : open+1+end]
}

func TestInvalidRequestsTouchNothing(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	long := strings.Repeat("x", backend.MaxKeyRunes+1)
	const a = "attempt-1"
	acquires := []backend.AcquireRequest{
		{Key: "", Owner: "o", Attempt: a, TTL: time.Second},
		{Key: "   ", Owner: "o", Attempt: a, TTL: time.Second},
		{Key: "nul\x00", Owner: "o", Attempt: a, TTL: time.Second},
		{Key: "bad\xff", Owner: "o", Attempt: a, TTL: time.Second},
		{Key: long, Owner: "o", Attempt: a, TTL: time.Second},
		{Key: "k", Owner: "", Attempt: a, TTL: time.Second},
		{Key: "k", Owner: "o", Attempt: "", TTL: time.Second},
		{Key: "k", Owner: "o", Attempt: "with space", TTL: time.Second},
		{Key: "k", Owner: "o", Attempt: strings.Repeat("a", backend.MaxAttemptBytes+1), TTL: time.Second},
		{Key: "k", Owner: "o", Attempt: a, TTL: 0},
		{Key: "k", Owner: "o", Attempt: a, TTL: backend.MaxTTL + 1},
		{Key: "k", Owner: "o", Attempt: a, TTL: time.Second, Metadata: strings.Repeat("m", backend.MaxMetadataBytes+1)},
		// Queue requests: without Wait, windows out of range, a bad address.
		{Key: "k", Owner: "o", Attempt: a, TTL: time.Second, Queue: backend.QueueRequest{EntryTTL: time.Second, Pickup: time.Second}},
		{Key: "k", Owner: "o", Attempt: a, TTL: time.Second, Wait: true, Queue: backend.QueueRequest{Pickup: time.Second}},
		{Key: "k", Owner: "o", Attempt: a, TTL: time.Second, Wait: true, Queue: backend.QueueRequest{EntryTTL: time.Second}},
		{Key: "k", Owner: "o", Attempt: a, TTL: time.Second, Wait: true, Queue: backend.QueueRequest{EntryTTL: time.Second, Pickup: time.Second, Notify: "a b"}},
	}
	for _, r := range acquires {
		if _, err := b.Acquire(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Acquire(%q, %q, %q, %v): %v", r.Key, r.Owner, r.Attempt, r.TTL, err)
		}
	}
	for _, r := range []backend.RenewRequest{
		{Key: "k", Owner: "o", Attempt: a, Token: 0, TTL: time.Second},
		{Key: "k", Owner: "o", Attempt: "", Token: 1, TTL: time.Second},
	} {
		if _, err := b.Renew(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Renew(%+v): %v", r, err)
		}
	}
	for _, r := range []backend.ReleaseRequest{
		{Key: "k", Owner: " ", Attempt: a},
		{Key: "k", Owner: "o", Attempt: ""},
		{Key: "k", Owner: "o", Attempt: "é"},
	} {
		if err := b.Release(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Release(%+v): %v", r, err)
		}
	}
	if keys := c.Keys(ctx, b.cfg.prefix+"*").Val(); len(keys) != 0 {
		t.Fatalf("invalid requests created keys: %q", keys)
	}
}

// A Redis error reply is a fault, never "held by another".
func TestRedisErrorReplyIsWrapped(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	// A string where the lease hash belongs: HMGET answers WRONGTYPE.
	if err := c.Set(ctx, b.LeaseKey("k"), "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: time.Second})
	var rerr goredis.Error
	if err == nil || !errors.As(err, &rerr) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Acquire over a wrong-type key = %+v, %v; want a wrapped Redis error", g, err)
	}
	if g.Acquired || g.Holder != "" {
		t.Fatalf("a fault came with a grant: %+v", g)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "o", Attempt: "a", Token: 1, TTL: time.Second}); err == nil || isNotHeld(err) || !errors.As(err, &rerr) {
		t.Fatalf("Renew over a wrong-type key: %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "o", Attempt: "a"}); err == nil || !errors.As(err, &rerr) {
		t.Fatalf("Release over a wrong-type key: %v", err)
	}
}

// A lease hash in the older layout (no record version) with no expiry was not
// written by leasehold (a PERSIST, a hand-made key), nor was a record of a
// version this one does not know: acquire and inspect say so instead of
// reporting a holder forever or misreading it.
func TestLeaseNotOursIsAFault(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	for key, fields := range map[string][]any{
		"no expiry":     {"owner", "alice", "attempt", "a-1", "token", "5", "meta", ""},
		"newer version": {"v", "3", "owner", "alice"},
	} {
		if err := c.HSet(ctx, b.LeaseKey(key), fields...).Err(); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"no expiry": "has no expiry", "newer version": "record version 3"}[key]
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "bob", Attempt: newAttempt(), TTL: time.Second})
		var rerr goredis.Error
		if !errors.As(err, &rerr) || !strings.Contains(err.Error(), want) || g.Acquired {
			t.Fatalf("Acquire over a hash with %s = %+v, %v; want a Redis error naming it", key, g, err)
		}
		if _, _, err := b.Inspect(ctx, key); !errors.As(err, &rerr) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Inspect of a hash with %s: %v; want a Redis error naming it", key, err)
		}
	}
}

// An unreachable server is a fault too, and neither errors nor logs carry the
// password of the address the client was built from.
func TestUnreachableServerIsAFaultAndLeaksNoCredentials(t *testing.T) {
	const secret = "s3cr3t-pa55"
	port := redistest.FreePort(t) // nothing listens there
	opt, err := goredis.ParseURL("redis://leaseuser:" + secret + "@127.0.0.1:" + itoa(port) + "/0")
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1
	c := goredis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	// New's policy check meets the missing server: a fault, not a policy.
	if _, err := New(c); err == nil || errors.Is(err, ErrEvictionPolicy) || strings.Contains(err.Error(), secret) {
		t.Fatalf("New with no server: %v; want a fault without the password", err)
	}
	var logs bytes.Buffer
	logged := &signalHandler{
		Handler: slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}),
		seen:    make(chan struct{}, 1),
	}
	b, err := New(c, WithEvictionAllowed(), WithLogger(slog.New(logged)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := ctxT(t)

	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: time.Second})
	if err == nil || g.Acquired {
		t.Fatalf("Acquire with no server = %+v, %v", g, err)
	}
	errs := []error{err}
	_, err = b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "o", Attempt: "a", Token: 1, TTL: time.Second})
	if err == nil || isNotHeld(err) {
		t.Fatalf("Renew with no server: %v", err)
	}
	errs = append(errs, err, b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "o", Attempt: "a"}))

	// Let the watch fail and log, then end it.
	wctx, cancel := withTimeout(ctx, 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.WatchReleases(wctx, func(string) {}) }()
	select {
	case <-logged.seen:
	case <-wctx.Done():
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("WatchReleases: %v", err)
	}
	for _, e := range errs {
		if e == nil {
			t.Fatal("a call to a missing server succeeded")
		}
		if strings.Contains(e.Error(), secret) {
			t.Fatalf("error leaks the password: %v", e)
		}
	}
	if !strings.Contains(logs.String(), "release watch interrupted") {
		t.Fatalf("expected the watch to log its reconnections, got %q", logs.String())
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("log leaks the password: %s", logs.String())
	}
}

// signalHandler is a slog.Handler that also signals each record it handles,
// so a test can await a log line instead of sleeping.
type signalHandler struct {
	slog.Handler
	seen chan struct{}
}

func (h *signalHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	select {
	case h.seen <- struct{}{}:
	default:
	}
	return err
}
