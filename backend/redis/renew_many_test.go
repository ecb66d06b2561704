package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// acquireMany grants n names (prefix-0, prefix-1, ...) each to an owner of
// its own (owner-0, ...), in one batch, for ttl.
func acquireMany(t *testing.T, b *Backend, prefix string, n int, ttl time.Duration) []holding {
	t.Helper()
	calls := make([]backend.Call, n)
	hs := make([]holding, n)
	for i := range calls {
		hs[i] = holding{key: fmt.Sprintf("%s-%d", prefix, i), owner: fmt.Sprintf("owner-%d", i), attempt: newAttempt()}
		calls[i] = backend.Call{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{
			Key: hs[i].key, Owner: hs[i].owner, Attempt: hs[i].attempt, TTL: ttl}}
	}
	b.Batch(ctxT(t), calls)
	for i, c := range calls {
		if c.Err != nil || !c.Grant.Acquired {
			t.Fatalf("acquire %q: %+v, %v", hs[i].key, c.Grant, c.Err)
		}
		hs[i].Grant = c.Grant
	}
	return hs
}

// wantRenewed checks that res renewed r: the grant, its token, and an expiry
// of ttl from a server time within [from, to].
func wantRenewed(t *testing.T, i int, r backend.RenewRequest, res backend.RenewResult, from, to time.Time) {
	t.Helper()
	if res.Err != nil || !res.Grant.Acquired || res.Grant.Token != r.Token {
		t.Errorf("result %d (%q) = %+v, %v; want renewed", i, r.Key, res.Grant, res.Err)
		return
	}
	// The server's milliseconds: from and to are microseconds.
	lo, hi := from.Add(r.TTL).Truncate(time.Millisecond), to.Add(r.TTL)
	if exp := res.Grant.ExpiresAt; exp.Before(lo) || exp.After(hi) {
		t.Errorf("result %d (%q) expires at %v, want within [%v, %v]", i, r.Key, exp, lo, hi)
	}
}

// wantNotHeld checks that res refuses r with ErrNotHeld, naming holder
// ("" for a free name) as renewAnswer does.
func wantNotHeld(t *testing.T, i int, r backend.RenewRequest, res backend.RenewResult, holder string) {
	t.Helper()
	want := fmt.Sprintf("redis: renew %q: %v (held by %q)", r.Key, backend.ErrNotHeld, holder)
	if holder == "" {
		want = fmt.Sprintf("redis: renew %q: %v (the name is free)", r.Key, backend.ErrNotHeld)
	}
	if !isNotHeld(res.Err) || res.Err.Error() != want || res.Grant.Acquired {
		t.Errorf("result %d (%q) = %+v, %v; want %q", i, r.Key, res.Grant, res.Err, want)
	}
}

// Every kind of answer in one batch, each for its own request and in order:
// renewed, not held (another's name, a stale token, another attempt, an
// expired lease, a free name), invalid (not sent), and a Redis error reply
// for one lease alone (its key is not a hash), which stops no other renewal.
func TestRenewBatchAnswersEachRenewal(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	a := mustAcquire(t, b, "a", "alice", 10*time.Second)
	bob := mustAcquire(t, b, "b", "bob", 10*time.Second)
	x := mustAcquire(t, b, "x {tag}", "alice", 10*time.Second)
	exp := mustAcquire(t, b, "expired", "alice", time.Millisecond)
	waitExpired(t, b, "expired")
	if err := c.Set(ctx, b.LeaseKey("wrong type"), "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	stale := a.renew(time.Minute)
	stale.Token++
	otherAttempt := x.renew(time.Minute)
	otherAttempt.Attempt = newAttempt()
	notHers := bob.renew(time.Minute)
	notHers.Owner = "alice"
	zeroTTL := a.renew(0)
	reqs := []backend.RenewRequest{
		0:  a.renew(time.Minute),
		1:  stale,
		2:  {Key: "", Owner: "alice", Attempt: a.attempt, Token: 1, TTL: time.Minute}, // invalid
		3:  notHers,
		4:  {Key: "wrong type", Owner: "alice", Attempt: a.attempt, Token: 3, TTL: time.Minute},
		5:  x.renew(2 * time.Minute),
		6:  otherAttempt,
		7:  exp.renew(time.Minute),
		8:  zeroTTL, // invalid
		9:  {Key: "free", Owner: "alice", Attempt: a.attempt, Token: 9, TTL: time.Minute},
		10: bob.renew(3 * time.Minute),
		11: a.renew(time.Minute), // again: renewed again
	}
	from := serverTime(t, c)
	res, err := b.RenewBatch(ctx, reqs)
	to := serverTime(t, c)
	if err != nil || len(res) != len(reqs) {
		t.Fatalf("RenewBatch: %d results for %d requests, %v", len(res), len(reqs), err)
	}
	for _, i := range []int{0, 5, 10, 11} {
		wantRenewed(t, i, reqs[i], res[i], from, to)
	}
	wantNotHeld(t, 1, reqs[1], res[1], "alice")
	wantNotHeld(t, 3, reqs[3], res[3], "bob")
	wantNotHeld(t, 6, reqs[6], res[6], "alice")
	wantNotHeld(t, 7, reqs[7], res[7], "")
	wantNotHeld(t, 9, reqs[9], res[9], "")
	for _, i := range []int{2, 8} {
		if !errors.Is(res[i].Err, backend.ErrInvalidRequest) {
			t.Errorf("result %d: %v, want ErrInvalidRequest", i, res[i].Err)
		}
	}
	var reply goredis.Error
	if err := res[4].Err; !errors.As(err, &reply) || !goredis.HasErrorPrefix(reply, "WRONGTYPE") || isNotHeld(err) ||
		!strings.HasPrefix(err.Error(), `redis: renew "wrong type": `) {
		t.Errorf("result 4 (a key of the wrong type): %v, want its WRONGTYPE error reply", err)
	}
	// The server agrees: renewed leases run for their new TTLs, the others
	// as they were.
	for key, least := range map[string]time.Duration{"a": 50 * time.Second, "x {tag}": 110 * time.Second, "b": 170 * time.Second} {
		if left := holdingTTL(t, c, b, key); left < least {
			t.Errorf("%q: %v left after the batch, want at least %v", key, left, least)
		}
	}
	if n := c.Exists(ctx, b.LeaseKey("free")).Val(); n != 0 || isHeld(t, c, b, "expired") {
		t.Errorf("a renewal of a free name created %d keys, or renewed an expired one", n)
	}
}

// A batch larger than one script call goes in ceil(n/500) calls of
// renew_many (counted by the server, which runs nothing else), and each
// renewal is still answered for itself, in order, across the calls'
// boundaries. Every renewal of one call is timed by one TIME.
func TestRenewBatchInCalls(t *testing.T) {
	s := redistest.Start(t) // its own server: the test counts its commands
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	const n = 2*maxRenewChunk + 3
	hs := acquireMany(t, b, "many", n, time.Minute)
	reqs := make([]backend.RenewRequest, n)
	stale := func(i int) bool { return i%97 == 5 || i == maxRenewChunk }
	invalid := func(i int) bool { return i == 0 || i == maxRenewChunk+1 }
	held := 0
	for i, h := range hs {
		reqs[i] = h.renew(2 * time.Minute)
		switch {
		case stale(i):
			reqs[i].Token++
		case invalid(i):
			reqs[i].Token = 0
		default:
			held++
		}
	}
	sent := n - 2 // 2*maxRenewChunk + 1: three calls
	if err := renewManyScript.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}

	from := serverTime(t, c) // its TIME outside the count
	before := commandCalls(t, c)
	res, err := b.RenewBatch(ctx, reqs)
	after := commandCalls(t, c)
	to := serverTime(t, c)
	if err != nil || len(res) != n {
		t.Fatalf("RenewBatch: %d results, %v", len(res), err)
	}
	calls := func(cmd string) int { return after[cmd] - before[cmd] }
	wantCalls := (sent + maxRenewChunk - 1) / maxRenewChunk
	if calls("evalsha") != wantCalls || calls("eval") != 0 {
		t.Errorf("%d renewals made %d EVALSHA and %d EVAL, want %d script calls", sent, calls("evalsha"), calls("eval"), wantCalls)
	}
	if calls("hmget") != sent || calls("hset") != held || calls("time") != wantCalls {
		t.Errorf("the scripts ran %d HMGET, %d HSET, %d TIME; want %d, %d, %d",
			calls("hmget"), calls("hset"), calls("time"), sent, held, wantCalls)
	}

	var first time.Time // the expiry of the first call's renewals
	for i, r := range reqs {
		switch {
		case stale(i):
			wantNotHeld(t, i, r, res[i], hs[i].owner) // its own holder: in order
		case invalid(i):
			if !errors.Is(res[i].Err, backend.ErrInvalidRequest) {
				t.Errorf("result %d: %v, want ErrInvalidRequest", i, res[i].Err)
			}
		default:
			wantRenewed(t, i, r, res[i], from, to)
			if i <= maxRenewChunk { // the first 500 sent
				if first.IsZero() {
					first = res[i].Grant.ExpiresAt
				} else if !res[i].Grant.ExpiresAt.Equal(first) {
					t.Errorf("result %d expires at %v, the first call's first at %v: TIME read more than once",
						i, res[i].Grant.ExpiresAt, first)
				}
			}
		}
	}
	for i := range reqs {
		if left := holdingTTL(t, c, b, reqs[i].Key); (left > time.Minute) != (!stale(i) && !invalid(i)) {
			t.Errorf("%q: %v left after the batch", reqs[i].Key, left)
		}
	}
}

// After SCRIPT FLUSH every call of a batch is refused with NOSCRIPT: the
// script is loaded once and the calls are sent again, all of them, so
// every renewal goes through.
func TestRenewBatchInCallsAfterScriptFlush(t *testing.T) {
	s := redistest.Start(t) // its own server: the test empties the script cache
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	const n = 2*maxRenewChunk + 1
	hs := acquireMany(t, b, "flushed", n, time.Minute)
	reqs := make([]backend.RenewRequest, n)
	for i, h := range hs {
		reqs[i] = h.renew(2 * time.Minute)
	}
	for round := range 2 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		before := commandCalls(t, c)
		res, err := b.RenewBatch(ctx, reqs)
		after := commandCalls(t, c)
		if err != nil {
			t.Fatalf("round %d: RenewBatch: %v", round, err)
		}
		for i := range res {
			if res[i].Err != nil || !res[i].Grant.Acquired {
				t.Fatalf("round %d: result %d after SCRIPT FLUSH: %+v, %v", round, i, res[i].Grant, res[i].Err)
			}
		}
		if loads := after["script|load"] - before["script|load"]; loads != 1 {
			t.Errorf("round %d: %d SCRIPT LOAD, want 1", round, loads)
		}
		if ran := after["hmget"] - before["hmget"]; ran != n {
			t.Errorf("round %d: %d renewals ran, want each of %d once", round, ran, n)
		}
	}
	if known, err := c.ScriptExists(ctx, renewManyScript.Hash()).Result(); err != nil || !known[0] {
		t.Fatalf("renew_many not loaded again: %v, %v", known, err)
	}
}

// A renew_many call refused with NOSCRIPT is sent again unless a later call
// on one of its names ran.
func TestRefusedForNoScriptKeepsOrderAcrossNames(t *testing.T) {
	ctx := context.Background()
	call := func(names []string, err error) *scriptCall {
		c := &scriptCall{names: names}
		if len(names) == 1 {
			c = &scriptCall{name: names[0]}
		}
		c.fail(ctx, err)
		if err == nil {
			c.cmd.SetVal(int64(1))
		}
		return c
	}
	noScript := goredis.ErrNoScript
	calls := []*scriptCall{
		0: call([]string{"a", "b", "c"}, noScript),
		1: call([]string{"c"}, nil), // ran: call 0 can no longer run before it
		2: call([]string{"d", "e"}, noScript),
		3: call([]string{"e", "f"}, noScript), // refused too: 2 may still run first
		4: call([]string{"g", "h"}, nil),
		5: call([]string{"x", "g"}, noScript),
	}
	got := refusedForNoScript(calls)
	want := []*scriptCall{calls[2], calls[3], calls[5]}
	if len(got) != len(want) {
		t.Fatalf("%d calls to send again, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("call %d to send again is %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := refusedForNoScript(calls[1:2]); got != nil {
		t.Fatalf("nothing refused, yet %d calls to send again", len(got))
	}
}

// renewChunks cuts a batch into calls of at most maxRenewChunk renewals,
// in order, and on Cluster into calls of one slot each, the renewals of
// one slot in their order; each call carries its renewals' keys and
// arguments.
func TestRenewChunks(t *testing.T) {
	const n = 4 * maxRenewChunk
	rs := make([]backend.RenewRequest, n)
	keys := make([]string, n)
	var idx []int
	for i := range rs {
		rs[i] = backend.RenewRequest{Key: fmt.Sprintf("k%d", i), Owner: "o", Attempt: fmt.Sprintf("a%d", i), Token: uint64(i + 1), TTL: time.Second}
		switch {
		case i%3 == 0: // more than one call's worth in one slot
			keys[i] = "p{same}:lease"
		case i%7 == 0:
			keys[i] = "p{other}:lease"
		default:
			keys[i] = "p{" + rs[i].Key + "}:lease"
		}
		if i%11 != 4 { // some not sent
			idx = append(idx, i)
		}
	}
	for _, bySlot := range []bool{false, true} {
		chunks := renewChunks(rs, keys, idx, bySlot)
		var seen []int
		lastOfSlot := map[int]int{}
		for k, ch := range chunks {
			c := ch.call
			if len(ch.idx) == 0 || len(ch.idx) > maxRenewChunk || len(c.keys) != len(ch.idx) ||
				len(c.names) != len(ch.idx) || len(c.args) != 4*len(ch.idx) || c.script != renewManyScript || !c.confirm {
				t.Fatalf("bySlot %v: call %d of %d renewals: %d keys, %d names, %d args", bySlot, k, len(ch.idx), len(c.keys), len(c.names), len(c.args))
			}
			for j, i := range ch.idx {
				want := appendRenewArgs(nil, rs[i])
				if c.keys[j] != keys[i] || c.names[j] != rs[i].Key || fmt.Sprint(c.args[4*j:4*j+4]) != fmt.Sprint(want) {
					t.Fatalf("bySlot %v: call %d, renewal %d: key %q, name %q, args %v; want those of request %d",
						bySlot, k, j, c.keys[j], c.names[j], c.args[4*j:4*j+4], i)
				}
				slot := keySlot(keys[i])
				if bySlot && slot != keySlot(c.keys[0]) {
					t.Fatalf("call %d mixes slots %d and %d", k, keySlot(c.keys[0]), slot)
				}
				if last, ok := lastOfSlot[slot]; ok && last > i {
					t.Fatalf("bySlot %v: request %d goes after request %d of its slot", bySlot, i, last)
				}
				lastOfSlot[slot] = i
			}
			seen = append(seen, ch.idx...)
		}
		if !bySlot && fmt.Sprint(seen) != fmt.Sprint(idx) {
			t.Fatalf("the calls carry %v, want %v in order", seen, idx)
		}
		if same := slices.IndexFunc(chunks, func(ch renewChunk) bool { return ch.call.keys[0] == "p{same}:lease" }); bySlot &&
			(same < 0 || len(chunks[same].idx) != maxRenewChunk || chunks[same+1].call.keys[0] != "p{same}:lease") {
			t.Fatalf("the slot of more than %d renewals is not cut in calls of %d", maxRenewChunk, maxRenewChunk)
		}
		if len(seen) != len(idx) {
			t.Fatalf("bySlot %v: the calls carry %d renewals, want %d", bySlot, len(seen), len(idx))
		}
		want := (len(idx) + maxRenewChunk - 1) / maxRenewChunk
		if !bySlot && len(chunks) != want {
			t.Fatalf("%d calls for %d renewals, want %d", len(chunks), len(idx), want)
		}
	}
}

// keySlot is Redis Cluster's slot: the examples of the Cluster
// specification (the hash tag rules included).
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":               0x31C3 % clusterSlots, // CRC16-XMODEM's check value
		"{user1000}.following":    keySlot("user1000"),
		"foo{}{bar}":              keySlot("foo{}{bar}"),
		"foo{{bar}}zap":           keySlot("{bar"),
		"foo{bar}{zap}":           keySlot("bar"),
		"":                        0,
		"no closing { brace":      keySlot("no closing { brace"),
		"leasehold:{a%7Bb}:lease": keySlot("a%7Bb"),
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if keySlot("foo{}{bar}") == keySlot("bar") {
		t.Error(`"foo{}{bar}" hashed by "bar": an empty tag is no tag`)
	}
}

// On Cluster a batch goes to each master in one pipeline, one renew_many
// call per slot: names that share a slot share a call (a refusal among them
// answered for itself), every other name has one of its own. The first batch
// finds the script on no master (NOSCRIPT, loaded, sent again); under
// replica confirmation each master's WAIT confirms its renewals.
func TestRenewBatchOnClusterBySlot(t *testing.T) {
	t.Parallel()
	c := startTestCluster(t)
	cc := newClusterClient(t, c)
	ctx := ctxT(t)
	b := newTestBackend(t, cc)

	// Names that share a slot: three in one, two in another (names share a
	// slot only by chance: each is its own hash tag), and singles.
	names := map[int][]string{}
	var three, two []string
	for i := 0; three == nil || two == nil; i++ {
		name := fmt.Sprintf("n-%d", i)
		s := keySlot(b.LeaseKey(name))
		names[s] = append(names[s], name)
		switch {
		case len(names[s]) == 3 && three == nil:
			three = names[s]
		case len(names[s]) == 2 && two == nil && three == nil:
			two = names[s]
		}
	}
	keys := append(slices.Clone(three), two...)
	for s, ns := range names {
		if len(keys) == 5+30 {
			break
		}
		if len(ns) == 1 && s != keySlot(b.LeaseKey(three[0])) && s != keySlot(b.LeaseKey(two[0])) {
			keys = append(keys, ns[0])
		}
	}
	// keySlot is the servers' slot.
	for _, key := range append([]string{"123456789", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}"}, keys...) {
		if !strings.Contains(key, "{") {
			key = b.LeaseKey(key)
		}
		if want, err := cc.ClusterKeySlot(ctx, key).Result(); err != nil || keySlot(key) != int(want) {
			t.Fatalf("keySlot(%q) = %d, CLUSTER KEYSLOT %d, %v", key, keySlot(key), want, err)
		}
	}

	hs := make([]holding, len(keys))
	for i, key := range keys {
		hs[i] = mustAcquire(t, b, key, "alice", time.Minute)
	}
	reqs := make([]backend.RenewRequest, 0, len(hs)+1)
	for _, h := range hs {
		reqs = append(reqs, h.renew(2*time.Minute))
	}
	reqs[1].Attempt = newAttempt() // in the slot of three: refused alone
	reqs[7].Token++                // a single's stale token
	reqs = append(reqs, backend.RenewRequest{Key: "invalid", Owner: "alice", Attempt: newAttempt(), Token: 1})
	check := func(what string, res []backend.RenewResult, err error) {
		t.Helper()
		if err != nil || len(res) != len(reqs) {
			t.Fatalf("%s: %d results, %v", what, len(res), err)
		}
		for i, r := range res {
			switch i {
			case 1, 7:
				wantNotHeld(t, i, reqs[i], r, "alice")
			case len(reqs) - 1:
				if !errors.Is(r.Err, backend.ErrInvalidRequest) {
					t.Errorf("%s: the invalid request: %v", what, r.Err)
				}
			default:
				if r.Err != nil || !r.Grant.Acquired || r.Grant.Token != reqs[i].Token {
					t.Errorf("%s: result %d (%q) = %+v, %v", what, i, reqs[i].Key, r.Grant, r.Err)
				}
			}
		}
	}
	res, err := b.RenewBatch(ctx, reqs)
	check("cold scripts", res, err)

	// The calls each master ran: one per slot of its names.
	wantCalls := map[string]map[int]bool{}
	for _, r := range reqs[:len(reqs)-1] {
		addr := masterAddr(ctx, t, cc, b.LeaseKey(r.Key))
		if wantCalls[addr] == nil {
			wantCalls[addr] = map[int]bool{}
		}
		wantCalls[addr][keySlot(b.LeaseKey(r.Key))] = true
	}
	if len(wantCalls) < 2 {
		t.Fatalf("the names reach %d master(s), want several", len(wantCalls))
	}
	before := scriptCalls(ctx, t, c)
	res, err = b.RenewBatch(ctx, reqs)
	check("warm scripts", res, err)
	after := scriptCalls(ctx, t, c)
	for addr, slots := range wantCalls {
		if got := after[addr] - before[addr]; got != len(slots) {
			t.Errorf("master %s ran %d script calls for renewals in %d slots", addr, got, len(slots))
		}
	}
	spanned := 0
	for _, slots := range wantCalls {
		spanned += len(slots)
	}
	if want := len(keys) - 3; spanned != want { // the three and the two share a slot each
		t.Errorf("the batch spans %d slots, want %d", spanned, want)
	}
	for _, key := range keys {
		if left := holdingTTL(t, cc, b, key); (left > time.Minute) != (key != keys[1] && key != keys[7]) {
			t.Errorf("%q: %v left after the batch", key, left)
		}
	}

	confirmed := newTestBackend(t, cc, WithKeyPrefix(b.cfg.prefix), WithReplicaConfirmation(1, 4*time.Second))
	res, err = confirmed.RenewBatch(ctx, reqs)
	check("under replica confirmation", res, err)
}
