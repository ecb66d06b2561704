package redis

import (
	_ "embed"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// The scripts of the older layout (a lease hash whose expiry is the
// deadline, and a counter key of its own), as the previous release shipped
// them: the upgrade tests run them beside the current ones, on one server
// and one prefix, as processes of both versions do during a rolling upgrade.
var (
	//go:embed testdata/v1/acquire.lua
	v1AcquireSrc string
	//go:embed testdata/v1/queue.lua
	v1QueueSrc string
	//go:embed testdata/v1/release.lua
	v1ReleaseSrc string
	//go:embed testdata/v1/renew.lua
	v1RenewSrc string
	//go:embed testdata/v1/renew_many.lua
	v1RenewManySrc string
	//go:embed testdata/v1/revoke.lua
	v1RevokeSrc string
	//go:embed testdata/v1/inspect.lua
	v1InspectSrc string
)

// v1 runs the older scripts with the arguments the older Go code sent,
// which are the current ones (calls.go): only the stored layout changed.
type v1 struct {
	t *testing.T
	b *Backend
	c goredis.UniversalClient
}

func v1Script(src string) *goredis.Script {
	src = strings.Replace(src, "\t--[[queue.lua]]\n", v1QueueSrc, 1)
	return goredis.NewScript(strings.ReplaceAll(src, "{{MaxQueueEntries}}", strconv.Itoa(backend.MaxQueueEntries)))
}

var (
	v1Acquire   = v1Script(v1AcquireSrc)
	v1Release   = v1Script(v1ReleaseSrc)
	v1Revoke    = v1Script(v1RevokeSrc)
	v1Renew     = goredis.NewScript(v1RenewSrc)
	v1RenewMany = goredis.NewScript(v1RenewManySrc)
	v1Inspect   = goredis.NewScript(v1InspectSrc)
)

func (o v1) run(s *goredis.Script, c scriptCall) (any, error) {
	return s.Run(ctxT(o.t), o.c, c.keys, c.args...).Result()
}

// acquire is the older acquire: its grant or refusal, or the script's error.
func (o v1) acquire(r backend.AcquireRequest) (backend.Grant, error) {
	o.t.Helper()
	reply, err := o.run(v1Acquire, o.b.acquireCall(r))
	if err != nil {
		return backend.Grant{}, err
	}
	g, err := parseAcquire(reply)
	if err != nil {
		o.t.Fatalf("older acquire: %v", err)
	}
	return g, nil
}

func (o v1) mustAcquire(key, owner, attempt string, q backend.QueueRequest) holding {
	o.t.Helper()
	g, err := o.acquire(backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: time.Minute, Wait: q.EntryTTL > 0, Queue: q})
	if err != nil || !g.Acquired {
		o.t.Fatalf("older acquire of %q by %s: %+v, %v", key, owner, g, err)
	}
	return holding{Grant: g, key: key, owner: owner, attempt: attempt}
}

func (o v1) renew(r backend.RenewRequest) (backend.Grant, string, error) {
	reply, err := o.run(v1Renew, o.b.renewCall(r))
	if err != nil {
		return backend.Grant{}, "", err
	}
	return parseRenew(reply)
}

func (o v1) release(r backend.ReleaseRequest) (any, error) {
	return o.run(v1Release, o.b.releaseCall(r))
}

// The new scripts meet what the older ones wrote: a live holding in the
// older layout is honoured (refused to others with its holder, token and
// time left; reported by Inspect and List; revocable), and the first grant
// after it carries the older counter key into the record, at least one
// above it, and deletes it.
func TestUpgradeFromTheOlderLayout(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	old := v1{t, b, c}
	ctx := ctxT(t)

	alice := old.mustAcquire("k", "alice", newAttempt(), backend.QueueRequest{})
	if pttl := c.PTTL(ctx, b.LeaseKey("k")).Val(); pttl <= 0 || c.Exists(ctx, b.TokenKey("k")).Val() != 1 {
		t.Fatalf("the older acquire wrote no older layout (PTTL %v)", pttl)
	}
	busy := mustBusy(t, b, "k", "bob", "alice")
	if busy.HolderToken != alice.Token || busy.HolderExpiresIn > time.Minute {
		t.Fatalf("refusal by the older holding: %+v, want alice's token %d", busy, alice.Token)
	}
	if h := mustHolder(t, b, "k", "alice"); h.Token != alice.Token || h.ExpiresIn <= 0 {
		t.Fatalf("Inspect of the older holding: %+v", h)
	}
	var listed []backend.Holder
	if err := b.List(ctx, "", func(h backend.Holder) bool { listed = append(listed, h); return true }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Owner != "alice" {
		t.Fatalf("List: %+v, want alice's older holding", listed)
	}
	// Its own renewals and release (by the older scripts) work as before.
	if g, _, err := old.renew(alice.renew(time.Minute)); err != nil || !g.Acquired {
		t.Fatalf("older renew of the older holding: %+v, %v", g, err)
	}
	if r, err := old.release(alice.release()); err != nil || r != int64(1) {
		t.Fatalf("older release: %v, %v", r, err)
	}
	// Free in the older layout: the counter key alone. Ahead of the clock,
	// so that the grant must take it and not the clock.
	ahead := uint64(serverTime(t, c).UnixMicro()) + 1e12
	if err := c.Set(ctx, b.TokenKey("k"), itoa64(ahead), 0).Err(); err != nil {
		t.Fatal(err)
	}
	bob := mustAcquire(t, b, "k", "bob", time.Minute)
	if bob.Token != ahead+1 {
		t.Fatalf("first grant after the older counter %d: token %d", ahead, bob.Token)
	}
	if c.Exists(ctx, b.TokenKey("k")).Val() != 0 || c.PTTL(ctx, b.LeaseKey("k")).Val() != -1 {
		t.Fatal("the older counter key was left, or the record has an expiry")
	}

	// A new revoke of an older holding ends it and keeps its counter.
	carol := old.mustAcquire("r", "carol", newAttempt(), backend.QueueRequest{})
	if h, removed, err := b.Revoke(ctx, "r", 0); err != nil || !removed || h.Owner != "carol" || h.Token != carol.Token {
		t.Fatalf("Revoke of the older holding: %+v, %v, %v", h, removed, err)
	}
	mustHolder(t, b, "r", "")
	if g, _, err := old.renew(carol.renew(time.Minute)); err != nil || g.Acquired {
		t.Fatalf("the revoked older holder renewed: %+v, %v", g, err)
	}
	if dave := mustAcquire(t, b, "r", "dave", time.Minute); dave.Token <= carol.Token {
		t.Fatalf("token after the revoke %d <= %d", dave.Token, carol.Token)
	}
}

// An older release hands an older holding to a new waiter: the waiter's
// pickup (its acquire, the same attempt) makes it a record with the token
// handed on, and the new scripts renew and release it.
func TestUpgradeHandOffFromAnOlderRelease(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	old := v1{t, b, c}
	ctx := ctxT(t)

	alice := old.mustAcquire("k", "alice", newAttempt(), backend.QueueRequest{})
	bob := newAttempt()
	mustQueue(t, b, "k", "bob", bob, queueReq("", 1))
	if r, err := old.release(alice.release()); err != nil || r != int64(2) {
		t.Fatalf("older release handing on: %v, %v", r, err)
	}
	handed := c.HGet(ctx, b.LeaseKey("k"), "token").Val()
	if c.PTTL(ctx, b.LeaseKey("k")).Val() <= 0 || c.HGet(ctx, b.LeaseKey("k"), "attempt").Val() != bob {
		t.Fatal("the older hand-off wrote no older holding")
	}
	mustBusy(t, b, "k", "carol", "bob")
	g := mustAcquireAs(t, b, "k", "bob", bob, time.Minute)
	if itoa64(g.Token) != handed || g.Token <= alice.Token {
		t.Fatalf("pickup token %d, handed on %s", g.Token, handed)
	}
	rec := c.HGetAll(ctx, b.LeaseKey("k")).Val()
	if rec["v"] != "2" || rec["att"] != bob || rec["attempt"] != "" || c.PTTL(ctx, b.LeaseKey("k")).Val() != -1 ||
		c.Exists(ctx, b.TokenKey("k")).Val() != 0 {
		t.Fatalf("after the pickup: record %v, PTTL %v", rec, c.PTTL(ctx, b.LeaseKey("k")).Val())
	}
	if _, err := b.Renew(ctx, g.renew(time.Minute)); err != nil {
		t.Fatalf("renew after the pickup: %v", err)
	}
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatal(err)
	}
	if next := mustAcquire(t, b, "k", "carol", time.Minute); next.Token <= g.Token {
		t.Fatalf("token %d after %d", next.Token, g.Token)
	}
}

// The older scripts meet records (a rolling upgrade): none grants a second
// holder, takes a record for a holding of its own, or changes it. Their
// acquire and inspect fail (the record has no expiry, and its attempt is
// not under the field they read), their renew and release find nothing
// held. A hand-off by the new scripts to an older waiter's entry is not
// picked up by it: its older acquire fails the same way, and the handed
// holding expires after its pickup window.
func TestUpgradeOlderScriptsMeetRecords(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	old := v1{t, b, c}
	ctx := ctxT(t)

	alice := mustAcquire(t, b, "k", "alice", time.Minute)
	free := mustAcquire(t, b, "free", "alice", time.Minute)
	if err := b.Release(ctx, free.release()); err != nil {
		t.Fatal(err)
	}
	// A free record without an expiry (one a waiter is queued on, or one
	// written before records were forgotten); a released one that expires
	// is TestUpgradeOlderScriptsMeetAForgettableRecord's.
	c.Persist(ctx, b.LeaseKey("free"))
	for _, key := range []string{"k", "free"} {
		before := c.HGetAll(ctx, b.LeaseKey(key)).Val()
		for name, r := range map[string]backend.AcquireRequest{
			"another owner":                 {Key: key, Owner: "bob", Attempt: newAttempt(), TTL: time.Minute},
			"another owner, queued":         queueOp(key, "bob", newAttempt(), queueReq("", 1)).Acquire,
			"the same owner, another try":   {Key: key, Owner: "alice", Attempt: newAttempt(), TTL: time.Minute},
			"the holder's attempt (a copy)": {Key: key, Owner: "alice", Attempt: alice.attempt, TTL: time.Minute},
		} {
			g, err := old.acquire(r)
			var reply goredis.Error
			if !errors.As(err, &reply) || g.Acquired {
				t.Fatalf("%s: older acquire (%s) = %+v, %v; want the script's error", key, name, g, err)
			}
		}
		if g, holder, err := old.renew(alice.renew(time.Minute)); err != nil || g.Acquired {
			t.Fatalf("%s: older renew = %+v (%q), %v; want not held", key, g, holder, err)
		}
		if reply, err := v1RenewMany.Run(ctx, c, []string{b.LeaseKey(key)}, appendRenewArgs(nil, alice.renew(time.Minute))...).Result(); err != nil ||
			reply.([]any)[0].([]any)[0] != int64(0) {
			t.Fatalf("%s: older renew_many = %v, %v; want not held", key, reply, err)
		}
		if r, err := old.release(alice.release()); err != nil || r != int64(0) {
			t.Fatalf("%s: older release = %v, %v; want 0", key, r, err)
		}
		var reply goredis.Error
		if _, err := v1Inspect.Run(ctx, c, []string{b.LeaseKey(key)}).Result(); !errors.As(err, &reply) {
			t.Fatalf("%s: older inspect: %v; want the script's error", key, err)
		}
		after := c.HGetAll(ctx, b.LeaseKey(key)).Val()
		if !maps.Equal(before, after) || c.PTTL(ctx, b.LeaseKey(key)).Val() != -1 || len(queued(t, b, key)) != 0 {
			t.Fatalf("%s: the older scripts changed the record %v to %v, or queued", key, before, after)
		}
	}
	mustHolder(t, b, "k", "alice")
	mustHolder(t, b, "free", "")

	// An older waiter queued behind an older holding; a new revoke hands
	// the name to it.
	older := old.mustAcquire("h", "carol", newAttempt(), backend.QueueRequest{})
	dave := newAttempt()
	if g, err := old.acquire(queueOp("h", "dave", dave, queueReq("", 1)).Acquire); err != nil || g.Acquired || !g.Queued {
		t.Fatalf("older queued acquire: %+v, %v", g, err)
	}
	if _, removed, err := b.Revoke(ctx, "h", older.Token); err != nil || !removed {
		t.Fatalf("Revoke: %v, %v", removed, err)
	}
	handed := mustHolder(t, b, "h", "dave")
	if g, err := old.acquire(backend.AcquireRequest{Key: "h", Owner: "dave", Attempt: dave, TTL: time.Minute}); err == nil || g.Acquired {
		t.Fatalf("the older waiter picked up a record: %+v, %v", g, err)
	}
	if g, _, err := old.renew(backend.RenewRequest{Key: "h", Owner: "dave", Attempt: dave, Token: handed.Token, TTL: time.Minute}); err != nil || g.Acquired {
		t.Fatalf("the older waiter renewed a record: %+v, %v", g, err)
	}
	if c.PTTL(ctx, b.LeaseKey("h")).Val() != -1 {
		t.Fatal("the older scripts gave the record an expiry")
	}
	expireIn(t, c, b, "h", 0) // its pickup window ends
	if erin := mustAcquire(t, b, "h", "erin", time.Minute); erin.Token <= handed.Token {
		t.Fatalf("token %d after %d", erin.Token, handed.Token)
	}
}

// A released record, which expires to be forgotten, reads to the older
// scripts as a holding of the owner "" (a hash with an owner and a TTL):
// their acquire is refused and grants nothing, their renew and release
// match nothing, and the record is forgotten when it was set to be. Then
// the older acquire takes the name as one without a record, its token on
// the clock, above the record's.
func TestUpgradeOlderScriptsMeetAForgettableRecord(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c, WithForgetAfter(300*time.Millisecond))
	old := v1{t, b, c}
	ctx := ctxT(t)
	alice := mustAcquire(t, b, "k", "alice", time.Minute)
	if err := b.Release(ctx, alice.release()); err != nil {
		t.Fatal(err)
	}
	at := forgetTime(t, c, b, "k")
	for name, r := range map[string]backend.AcquireRequest{
		"another owner":    {Key: "k", Owner: "bob", Attempt: newAttempt(), TTL: time.Minute},
		"the last holder":  {Key: "k", Owner: "alice", Attempt: alice.attempt, TTL: time.Minute},
		"another, waiting": {Key: "k", Owner: "bob", Attempt: newAttempt(), TTL: time.Minute, Wait: true},
	} {
		if g, err := old.acquire(r); err != nil || g.Acquired || g.Holder != "" {
			t.Fatalf("older acquire (%s) = %+v, %v; want refused by the owner \"\"", name, g, err)
		}
	}
	if g, holder, err := old.renew(alice.renew(time.Minute)); err != nil || g.Acquired {
		t.Fatalf("older renew = %+v (%q), %v; want not held", g, holder, err)
	}
	if r, err := old.release(alice.release()); err != nil || r != int64(0) {
		t.Fatalf("older release = %v, %v; want 0", r, err)
	}
	if got := forgetTime(t, c, b, "k"); got != at {
		t.Fatalf("the older scripts moved the forget time from %d to %d", at, got)
	}
	awaitServerClock(t, c, at)
	if bob := old.mustAcquire("k", "bob", newAttempt(), backend.QueueRequest{}); bob.Token <= alice.Token {
		t.Fatalf("older token %d after %d", bob.Token, alice.Token)
	}
}

// An older revoke deletes a record it meets, counter and all (it ends any
// hash it finds). The next grant's token still exceeds every earlier one:
// the clock floor, as after the loss of the data.
func TestUpgradeOlderRevokeOfARecord(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	alice := mustAcquire(t, b, "k", "alice", time.Minute)
	keys := append(b.keysOf("k"), b.cfg.prefix+hashTag("k")+":revoked")
	reply, err := v1Revoke.Run(ctx, c, keys, "0", b.channelArg, "k", b.handOffArg, "older-revoke", revokeReceiptTTL.Milliseconds()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if h, removed, err := parseHolding("k", reply); err != nil || !removed || h.Owner != "alice" {
		t.Fatalf("older revoke: %+v, %v, %v", h, removed, err)
	}
	if _, err := b.Renew(ctx, alice.renew(time.Minute)); !isNotHeld(err) {
		t.Fatalf("renew after the older revoke: %v", err)
	}
	if bob := mustAcquire(t, b, "k", "bob", time.Minute); bob.Token <= alice.Token {
		t.Fatalf("token %d after %d", bob.Token, alice.Token)
	}
}
