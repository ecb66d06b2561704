package redis

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// mustSlot grants one of limit n's slots of key to owner in a new attempt.
func mustSlot(t *testing.T, b *Backend, key, owner string, n int) holding {
	t.Helper()
	a := newAttempt()
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: key, Owner: owner, Attempt: a, TTL: time.Minute, Limit: n})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire(%q, %q, limit %d) = %+v, %v; want a grant", key, owner, n, g, err)
	}
	return holding{Grant: g, key: key, owner: owner, attempt: a}
}

// A name held under a limit above 1 is one record: owner "\0" (no
// exclusive holder), its limit n, the count c of its holdings and each
// holding as the field h:<attempt>; the record's token is the highest
// issued, and its exp no earlier than any holding's deadline. The last
// release leaves a free exclusive record with the token.
func TestSharedRecordLayout(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	a := mustSlot(t, b, "k", "alice", 3)
	bob := mustSlot(t, b, "k", "bob", 3)
	rec := c.HGetAll(ctx, b.LeaseKey("k")).Val()
	if rec["v"] != "2" || rec["owner"] != "\x00" || rec["n"] != "3" || rec["c"] != "2" || rec["token"] != itoa64(bob.Token) ||
		!strings.HasPrefix(rec["h:"+a.attempt], itoa64(uint64(a.ExpiresAt.UnixMilli()))+"\x00"+itoa64(a.Token)+"\x00alice\x00") ||
		rec["exp"] != itoa64(uint64(bob.ExpiresAt.UnixMilli())) {
		t.Fatalf("record of two holdings: %q", rec)
	}
	if c.PTTL(ctx, b.LeaseKey("k")).Val() != -1 {
		t.Fatal("the shared record has an expiry")
	}
	for _, h := range []holding{a, bob} {
		if err := b.Release(ctx, h.release()); err != nil {
			t.Fatal(err)
		}
	}
	rec = c.HGetAll(ctx, b.LeaseKey("k")).Val()
	want := map[string]string{"v": "2", "owner": "", "att": "", "meta": "", "token": itoa64(bob.Token), "exp": rec["exp"]}
	if !maps.Equal(rec, want) {
		t.Fatalf("record after the last release: %q, want %q", rec, want)
	}
	if g := mustAcquire(t, b, "k", "carol", time.Minute); g.Token <= bob.Token {
		t.Fatalf("exclusive token %d after %d", g.Token, bob.Token)
	}
}

// The older scripts (testdata/v1) meet a name held under a limit above 1:
// none grants, none takes a holding for its own, none changes the record.
// Their acquire and inspect fail (the record has no expiry), their renew,
// renew_many and release find nothing held. An older revoke deletes the
// record, every holding with it: the holders' next renewals fail, and the
// next grant's token is above theirs (the clock floor).
func TestUpgradeOlderScriptsMeetASharedName(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	old := v1{t, b, c}
	ctx := ctxT(t)

	alice := mustSlot(t, b, "k", "alice", 2)
	bob := mustSlot(t, b, "k", "bob", 2)
	before := c.HGetAll(ctx, b.LeaseKey("k")).Val()
	for name, r := range map[string]backend.AcquireRequest{
		"another owner":                  {Key: "k", Owner: "carol", Attempt: newAttempt(), TTL: time.Minute},
		"another owner, queued":          queueOp("k", "carol", newAttempt(), queueReq("", 1)).Acquire,
		"a holder's attempt (a copy)":    {Key: "k", Owner: "alice", Attempt: alice.attempt, TTL: time.Minute},
		"an owner of \"\\0\" (a forger)": {Key: "k", Owner: "\x00", Attempt: newAttempt(), TTL: time.Minute},
	} {
		g, err := old.acquire(r)
		var reply goredis.Error
		if !errors.As(err, &reply) || g.Acquired {
			t.Fatalf("older acquire (%s) = %+v, %v; want the script's error", name, g, err)
		}
	}
	for _, h := range []holding{alice, bob} {
		if g, holder, err := old.renew(h.renew(time.Minute)); err != nil || g.Acquired {
			t.Fatalf("older renew of %s = %+v (%q), %v; want not held", h.owner, g, holder, err)
		}
		if reply, err := v1RenewMany.Run(ctx, c, []string{b.LeaseKey("k")}, appendRenewArgs(nil, h.renew(time.Minute))...).Result(); err != nil ||
			reply.([]any)[0].([]any)[0] != int64(0) {
			t.Fatalf("older renew_many of %s = %v, %v; want not held", h.owner, reply, err)
		}
		if r, err := old.release(h.release()); err != nil || r != int64(0) {
			t.Fatalf("older release of %s = %v, %v; want 0", h.owner, r, err)
		}
	}
	var reply goredis.Error
	if _, err := v1Inspect.Run(ctx, c, []string{b.LeaseKey("k")}).Result(); !errors.As(err, &reply) {
		t.Fatalf("older inspect: %v; want the script's error", err)
	}
	if after := c.HGetAll(ctx, b.LeaseKey("k")).Val(); !maps.Equal(before, after) || c.PTTL(ctx, b.LeaseKey("k")).Val() != -1 {
		t.Fatalf("the older scripts changed the record %q to %q", before, after)
	}
	if hs, err := b.Holders(ctx, "k"); err != nil || len(hs) != 2 || hs[0].Token != alice.Token || hs[1].Token != bob.Token {
		t.Fatalf("Holders after the older scripts: %+v, %v", hs, err)
	}

	// The older revoke ends every holding at once.
	keys := append(b.keysOf("k"), b.cfg.prefix+hashTag("k")+":revoked")
	if _, err := v1Revoke.Run(ctx, c, keys, "0", b.channelArg, "k", b.handOffArg, "older-revoke", revokeReceiptTTL.Milliseconds()).Result(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []holding{alice, bob} {
		if _, err := b.Renew(ctx, h.renew(time.Minute)); !isNotHeld(err) {
			t.Fatalf("renew of %s after the older revoke: %v", h.owner, err)
		}
	}
	if g := mustSlot(t, b, "k", "dave", 2); g.Token <= bob.Token {
		t.Fatalf("token %d after %d", g.Token, bob.Token)
	}
}

// A name in the older layout meets an acquire under a limit above 1: an
// older holding refuses it with limit 1 (nothing changes, nothing queued);
// a name free in the older layout is granted with a token above the older
// counter, which goes.
func TestUpgradeSharedAcquireOnTheOlderLayout(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	old := v1{t, b, c}
	ctx := ctxT(t)

	alice := old.mustAcquire("k", "alice", newAttempt(), backend.QueueRequest{})
	before := c.HGetAll(ctx, b.LeaseKey("k")).Val()
	g, err := b.Acquire(ctx, limited(queueOp("k", "bob", newAttempt(), queueReq("", 1)).Acquire, 2))
	if err != nil || g.Acquired || g.HeldLimit != 1 || g.Queued || g.Holder != "alice" || g.HolderToken != alice.Token {
		t.Fatalf("limit 2 on an older holding = %+v, %v; want a refusal with HeldLimit 1 naming alice, not queued", g, err)
	}
	if after := c.HGetAll(ctx, b.LeaseKey("k")).Val(); !maps.Equal(before, after) || len(queued(t, b, "k")) != 0 {
		t.Fatalf("the refusal changed %q to %q, or queued", before, after)
	}
	if r, err := old.release(alice.release()); err != nil || r != int64(1) {
		t.Fatalf("older release: %v, %v", r, err)
	}
	ahead := uint64(serverTime(t, c).UnixMicro()) + 1e12
	if err := c.Set(ctx, b.TokenKey("k"), itoa64(ahead), 0).Err(); err != nil {
		t.Fatal(err)
	}
	bob := mustSlot(t, b, "k", "bob", 2)
	if bob.Token != ahead+1 || c.Exists(ctx, b.TokenKey("k")).Val() != 0 {
		t.Fatalf("first shared grant after the older counter %d: token %d (counter key left: %d)",
			ahead, bob.Token, c.Exists(ctx, b.TokenKey("k")).Val())
	}
}

// limited is r under limit n.
func limited(r backend.AcquireRequest, n int) backend.AcquireRequest {
	r.Limit = n
	return r
}

// What the paths of a name held under a limit above 1 cost the server, and
// that the exclusive paths pay nothing for them (TestQueueCostsTheOtherPathsLittle
// counts those).
func TestSharedPathsCost(t *testing.T) {
	s := redistest.Start(t) // its own server: the test reads and resets its statistics
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	count := func(what string, want map[string]int, run func()) {
		t.Helper()
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		run()
		got := commandCalls(t, c)
		for _, cmd := range []string{"config|resetstat", "evalsha", "eval", "script|load", "hello"} {
			delete(got, cmd)
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	var h1, h2 holding
	count("acquire of a name without a record", map[string]int{"time": 1, "hmget": 1, "get": 1, "lindex": 1, "hset": 1}, func() {
		h1 = mustSlot(t, b, "k", "alice", 2)
	})
	count("acquire of a free slot", map[string]int{"time": 1, "hmget": 1, "hgetall": 1, "hset": 1}, func() {
		h2 = mustSlot(t, b, "k", "bob", 2)
	})
	count("the same attempt again", map[string]int{"time": 1, "hmget": 1, "hgetall": 1, "hset": 1}, func() {
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "bob", Attempt: h2.attempt, TTL: time.Minute, Limit: 2})
		if err != nil || !g.Acquired || g.Token != h2.Token {
			t.Fatalf("retry: %+v, %v", g, err)
		}
	})
	count("refusal, full", map[string]int{"time": 1, "hmget": 1, "hgetall": 1}, func() {
		if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "carol", Attempt: newAttempt(), TTL: time.Minute, Limit: 2}); err != nil || g.Acquired {
			t.Fatalf("third holder: %+v, %v", g, err)
		}
	})
	count("refusal, another limit", map[string]int{"time": 1, "hmget": 1, "hgetall": 1}, func() {
		if g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "carol", Attempt: newAttempt(), TTL: time.Minute}); err != nil || g.HeldLimit != 2 {
			t.Fatalf("exclusive acquire: %+v, %v", g, err)
		}
	})
	count("renewal", map[string]int{"hmget": 1, "time": 1, "hget": 1, "hset": 1}, func() {
		if _, err := b.Renew(ctx, h1.renew(time.Minute)); err != nil {
			t.Fatal(err)
		}
	})
	count("renew_many of both", map[string]int{"time": 1, "hmget": 2, "hget": 2, "hset": 2}, func() {
		rs, err := b.RenewBatch(ctx, []backend.RenewRequest{h1.renew(time.Minute), h2.renew(time.Minute)})
		if err != nil || rs[0].Err != nil || rs[1].Err != nil {
			t.Fatalf("RenewBatch: %+v, %v", rs, err)
		}
	})
	count("inspection", map[string]int{"hmget": 1, "time": 1, "hgetall": 1}, func() {
		if hs, err := b.Holders(ctx, "k"); err != nil || len(hs) != 2 {
			t.Fatalf("Holders: %+v, %v", hs, err)
		}
	})
	count("release, unmarked, others remain", map[string]int{"hmget": 2, "time": 1, "hdel": 1, "hset": 1}, func() {
		if err := b.Release(ctx, h1.release()); err != nil {
			t.Fatal(err)
		}
	})
	count("release of the last holding", map[string]int{"hmget": 2, "time": 1, "hdel": 1, "hset": 1, "pexpireat": 1}, func() {
		if err := b.Release(ctx, h2.release()); err != nil {
			t.Fatal(err)
		}
	})
	count("acquire of a free record", map[string]int{"time": 1, "hmget": 1, "hset": 1, "persist": 1}, func() {
		h1 = mustSlot(t, b, "k", "alice", 2)
	})
	h2 = mustSlot(t, b, "k", "bob", 2)
	carol := newAttempt()
	count("first queued refusal", map[string]int{"time": 1, "hmget": 2, "hgetall": 1, "hset": 2, "llen": 1, "rpush": 1, "pexpireat": 2}, func() {
		g, err := b.Acquire(ctx, limited(queueOp("k", "carol", carol, queueReq("", 1)).Acquire, 2))
		if err != nil || g.Acquired || !g.Queued {
			t.Fatalf("queued: %+v, %v", g, err)
		}
	})
	count("release handing on", map[string]int{"hmget": 2, "time": 1, "lindex": 1, "hget": 1, "lpop": 1, "hdel": 2,
		"llen": 1, "del": 1, "hset": 1}, func() {
		if err := b.Release(ctx, h1.release()); err != nil {
			t.Fatal(err)
		}
	})
	if hs, err := b.Holders(ctx, "k"); err != nil || len(hs) != 2 || hs[1].Owner != "carol" {
		t.Fatalf("Holders after the hand-off: %+v, %v", hs, err)
	}
}

// expireSlot ends the holding of attempt in key's shared record now on the
// server's clock, leaving the record's exp (a bound) as it was.
func expireSlot(t *testing.T, c goredis.UniversalClient, b *Backend, key, attempt string) {
	t.Helper()
	if err := expireSlotScript.Run(ctxT(t), c, []string{b.LeaseKey(key)}, "h:"+attempt).Err(); err != nil {
		t.Fatalf("expiring %s's slot of %q: %v", attempt, key, err)
	}
}

var expireSlotScript = goredis.NewScript(`
local d = redis.call('HGET', KEYS[1], ARGV[1])
if not d then return redis.error_reply('no such holding') end
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now_ms) .. string.match(d, '^%d+(.*)$'))
return 1`)

// Holdings that expired free their slots though the record's exp (a bound
// on their deadlines) has not passed: an exclusive acquire is granted and
// leaves a plain exclusive record; an acquire under another limit starts
// afresh, the expired holdings gone.
func TestExpiredSharedHoldingsFreeTheName(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	a1, a2 := mustSlot(t, b, "k", "alice", 2), mustSlot(t, b, "k", "bob", 2)
	expireSlot(t, c, b, "k", a1.attempt)
	if hs, err := b.Holders(ctx, "k"); err != nil || len(hs) != 1 || hs[0].Owner != "bob" {
		t.Fatalf("Holders after one expiry: %+v, %v", hs, err)
	}
	if h := mustHolder(t, b, "k", "bob"); h.Limit != 2 {
		t.Fatalf("Inspect: %+v, want limit 2", h)
	}
	expireSlot(t, c, b, "k", a2.attempt)
	mustHolder(t, b, "k", "")
	ex := mustAcquire(t, b, "k", "carol", time.Minute)
	if ex.Token <= a2.Token {
		t.Fatalf("token %d after %d", ex.Token, a2.Token)
	}
	for f := range c.HGetAll(ctx, b.LeaseKey("k")).Val() {
		if f == "n" || f == "c" || f == "g" || strings.HasPrefix(f, "h:") {
			t.Fatalf("the exclusive record kept the shared field %q", f)
		}
	}
	if h := mustHolder(t, b, "k", "carol"); h.Limit != 1 {
		t.Fatalf("Inspect: %+v, want limit 1", h)
	}
	if err := b.Release(ctx, ex.release()); err != nil {
		t.Fatal(err)
	}

	s1 := mustSlot(t, b, "s", "alice", 3)
	expireSlot(t, c, b, "s", s1.attempt)
	s2 := mustSlot(t, b, "s", "bob", 2)
	if hs, err := b.Holders(ctx, "s"); err != nil || len(hs) != 1 || hs[0].Limit != 2 || s2.Token <= s1.Token {
		t.Fatalf("Holders after a new limit: %+v, %v (tokens %d, %d)", hs, err, s1.Token, s2.Token)
	}
	if rec := c.HGetAll(ctx, b.LeaseKey("s")).Val(); rec["h:"+s1.attempt] != "" || rec["c"] != "1" || rec["n"] != "2" {
		t.Fatalf("record after a new limit: %q", rec)
	}
}

// Revoke of a name held under a limit: token 0 ends the holding that ends
// first, and the answer (also from the receipt) says its limit; the others
// stay.
func TestRevokeOfASharedHolding(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	long := mustSlot(t, b, "k", "alice", 2)
	a := newAttempt()
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "bob", Attempt: a, TTL: 30 * time.Second, Limit: 2})
	if err != nil || !g.Acquired {
		t.Fatalf("bob: %+v, %v", g, err)
	}
	short := holding{Grant: g, key: "k", owner: "bob", attempt: a}
	h, removed, err := b.Revoke(ctx, "k", 0)
	if err != nil || !removed || h.Owner != "bob" || h.Token != short.Token || h.Limit != 2 {
		t.Fatalf("Revoke(0) = %+v, %v, %v; want bob's holding (it ends first), limit 2", h, removed, err)
	}
	if _, err := b.Renew(ctx, short.renew(time.Minute)); !isNotHeld(err) {
		t.Fatalf("the revoked holding's renewal: %v", err)
	}
	if hs, err := b.Holders(ctx, "k"); err != nil || len(hs) != 1 || hs[0].Token != long.Token {
		t.Fatalf("Holders after the revoke: %+v, %v", hs, err)
	}
	receipt := c.HGetAll(ctx, b.cfg.prefix+hashTag("k")+":revoked").Val()
	reply, err := revokeScript.Run(ctx, c, append(b.keysOf("k"), b.cfg.prefix+hashTag("k")+":revoked"), itoa64(short.Token),
		b.channelArg, "k", b.handOffArg, receipt["id"], revokeReceiptTTL.Milliseconds(), b.forgetArg).Result()
	if h, removed, err := parseHolding("k", reply); err != nil || !removed || h.Token != short.Token || h.Limit != 2 {
		t.Fatalf("the receipt's answer: %+v, %v, %v (reply %v)", h, removed, err, reply)
	}
}

// A release of one of several holdings hands its slot to the queue's head
// with a hand-off notice (name, owner, attempt, the new token, the poll
// number), as an exclusive release does; the other holding stays.
func TestSharedHandOffNotice(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	w := startHandOffWatch(t, b, "addr-sem")
	w.awaitReady(t)
	a1, a2 := mustSlot(t, b, "k", "alice", 2), mustSlot(t, b, "k", "bob", 2)
	carol := newAttempt()
	if g, err := b.Acquire(ctx, limited(queueOp("k", "carol", carol, queueReq("addr-sem", 7)).Acquire, 2)); err != nil || g.Acquired || !g.Queued {
		t.Fatalf("carol queued: %+v, %v", g, err)
	}
	if err := b.Release(ctx, a1.release()); err != nil {
		t.Fatal(err)
	}
	h := w.await(t)
	if h.Key != "k" || h.Owner != "carol" || h.Attempt != carol || h.Poll != 7 || h.Token <= a2.Token {
		t.Fatalf("hand-off %+v, want carol's with poll 7 and a token above %d", h, a2.Token)
	}
	hs, err := b.Holders(ctx, "k")
	if err != nil || len(hs) != 2 || hs[0].Token != a2.Token || hs[1].Owner != "carol" || hs[1].Token != h.Token {
		t.Fatalf("Holders after the hand-off: %+v, %v", hs, err)
	}
	g, err := b.Acquire(ctx, limited(queueOp("k", "carol", carol, queueReq("addr-sem", 8)).Acquire, 2))
	if err != nil || !g.Acquired || g.Token != h.Token {
		t.Fatalf("carol's pickup: %+v, %v; want token %d", g, err, h.Token)
	}
}

// The restart grace holds back a free slot on a young server as it holds
// back a free name; a live holding's own attempt is refreshed all the same.
func TestRestartGraceHoldsBackAFreeSlot(t *testing.T) {
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	plain := newTestBackend(t, c)
	const grace = time.Minute // the test server is far younger: no timing at stake
	guarded, err := New(c, WithKeyPrefix(plain.cfg.prefix), WithRestartGrace(grace))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, guarded)
	ctx := ctxT(t)
	a := mustSlot(t, plain, "k", "alice", 2)
	for _, k := range []string{"k", "fresh"} {
		g, err := guarded.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: "bob", Attempt: newAttempt(), TTL: time.Minute, Limit: 2})
		if err != nil || g.Acquired || g.Holder != "" || g.HolderExpiresIn <= 0 || g.HolderExpiresIn > grace+time.Second {
			t.Fatalf("%s: a free slot on a young server = %+v, %v; want refused for the rest of the grace", k, g, err)
		}
	}
	g, err := guarded.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "alice", Attempt: a.attempt, TTL: time.Minute, Limit: 2})
	if err != nil || !g.Acquired || g.Token != a.Token {
		t.Fatalf("the holding's own attempt on a young server: %+v, %v", g, err)
	}
}

// A batch answers calls under a limit as the single calls would, in order
// on one name.
func TestBatchAnswersSharedCalls(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	req := func(owner string) backend.AcquireRequest {
		return backend.AcquireRequest{Key: "k", Owner: owner, Attempt: newAttempt(), TTL: time.Minute, Limit: 2}
	}
	calls := []backend.Call{{Acquire: req("alice")}, {Acquire: req("bob")}, {Acquire: req("carol")},
		{Acquire: backend.AcquireRequest{Key: "k", Owner: "dave", Attempt: newAttempt(), TTL: time.Minute}}}
	for i := range calls {
		calls[i].Op = backend.OpAcquire
	}
	b.Batch(ctx, calls)
	for i, want := range []bool{true, true, false, false} {
		if calls[i].Err != nil || calls[i].Grant.Acquired != want {
			t.Fatalf("call %d: %+v, %v; want acquired %v", i, calls[i].Grant, calls[i].Err, want)
		}
	}
	if h := calls[2].Grant.Holder; (h != "alice" && h != "bob") || calls[2].Grant.HeldLimit != 0 || calls[3].Grant.HeldLimit != 2 {
		t.Fatalf("refusals: %+v, %+v; want one naming a holder, then HeldLimit 2", calls[2].Grant, calls[3].Grant)
	}
}
