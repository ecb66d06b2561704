package redis

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// queueReq is a QueueRequest with long windows, notices to addr.
func queueReq(addr string, poll uint64) backend.QueueRequest {
	return backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Minute, Notify: addr, Poll: poll}
}

// queueOp is a waiting acquire of attempt that asks to be queued.
func queueOp(key, owner, attempt string, q backend.QueueRequest) backend.Call {
	c := acquireOp(key, owner, attempt, true)
	c.Acquire.Queue = q
	return c
}

// mustQueue makes attempt wait for key in its queue, or fails the test.
func mustQueue(t *testing.T, b *Backend, key, owner, attempt string, q backend.QueueRequest) backend.Grant {
	t.Helper()
	g, err := b.Acquire(ctxT(t), queueOp(key, owner, attempt, q).Acquire)
	if err != nil || g.Acquired || !g.Queued {
		t.Fatalf("queued Acquire(%q, %q) = %+v, %v; want a refusal with Queued", key, owner, g, err)
	}
	return g
}

// queued returns the attempts in key's queue, head first.
func queued(t *testing.T, b *Backend, key string) []string {
	t.Helper()
	q, _ := b.QueueKeys(key)
	as, err := b.client.LRange(ctxT(t), q, 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s: %v", q, err)
	}
	return as
}

// The queue's calls answer alike through a batch (one pipeline) and as single
// calls: queueing, keeping a place, the hand-off on release, its pickup, a
// waiter leaving, the head's turn on a free name, and the end state.
func TestBatchAnswersQueueCallsAsSingleCalls(t *testing.T) {
	c := redistest.Client(t)
	single, batched := newTestBackend(t, c), newTestBackend(t, c)
	for _, b := range []*Backend{single, batched} {
		mustAcquireAs(t, b, "busy", "bob", "bob-1", time.Minute)
		// "turn": the holding expires with a queued head, whose turn then
		// keeps the name for it (shortened once the head is queued).
		mustAcquireAs(t, b, "turn", "bob", "bob-2", time.Minute)
		mustQueue(t, b, "turn", "head", "head-1", queueReq("", 1))
		expireIn(t, c, b, "turn", 0)
		waitExpired(t, b, "turn")
	}
	calls := func() []backend.Call {
		return []backend.Call{
			queueOp("busy", "w1", "w1-1", queueReq("", 1)),
			queueOp("busy", "w1", "w1-1", queueReq("", 2)), // keeps its place
			queueOp("busy", "w2", "w2-1", queueReq("", 1)),
			acquireOp("busy", "poller", "p-1", true),                                       // waits, not queued
			releaseOp(backend.ReleaseRequest{Key: "busy", Owner: "bob", Attempt: "bob-1"}), // hands on to w1
			acquireOp("busy", "newcomer", "n-1", false),                                    // refused by w1
			releaseOp(backend.ReleaseRequest{Key: "busy", Owner: "w2", Attempt: "w2-1"}),   // w2 leaves
			queueOp("busy", "w1", "w1-1", queueReq("", 3)),                                 // the pickup
			releaseOp(backend.ReleaseRequest{Key: "busy", Owner: "w1", Attempt: "w1-1"}),   // nobody queued: free
			queueOp("turn", "w3", "w3-1", queueReq("", 1)),                                 // the head's turn
			acquireOp("turn", "newcomer", "n-2", false),
			queueOp("turn", "head", "head-1", queueReq("", 2)), // the head takes it
		}
	}
	want := calls()
	ctx := ctxT(t)
	for i := range want {
		switch r := &want[i]; r.Op {
		case backend.OpAcquire:
			r.Grant, r.Err = single.Acquire(ctx, r.Acquire)
		case backend.OpRelease:
			r.Err = single.Release(ctx, r.Release)
		}
	}
	got := calls()
	batched.Batch(ctx, got)
	for i := range want {
		w, g := want[i], got[i]
		if w.Err != nil || g.Err != nil {
			t.Errorf("call %d: single error %v, batch error %v", i, w.Err, g.Err)
		}
		// Times and tokens differ between the two runs; their presence must not.
		if w.Grant.Acquired != g.Grant.Acquired || w.Grant.Holder != g.Grant.Holder || w.Grant.Queued != g.Grant.Queued ||
			(w.Grant.Token == 0) != (g.Grant.Token == 0) || (w.Grant.HolderToken == 0) != (g.Grant.HolderToken == 0) ||
			(w.Grant.HolderExpiresIn > 0) != (g.Grant.HolderExpiresIn > 0) {
			t.Errorf("call %d: single %+v, batch %+v", i, w.Grant, g.Grant)
		}
	}
	// The answers are the ones the rules give (checked once, on the single calls).
	for i, queuedWant := range map[int]bool{0: true, 1: true, 2: true, 3: false, 9: true} {
		if g := want[i].Grant; g.Acquired || g.Queued != queuedWant {
			t.Errorf("call %d: %+v, want a refusal with Queued %v", i, g, queuedWant)
		}
	}
	if g := want[5].Grant; g.Acquired || g.Holder != "w1" {
		t.Errorf("the newcomer after the hand-off: %+v, want a refusal naming w1", g)
	}
	if g := want[7].Grant; !g.Acquired {
		t.Errorf("w1's pickup: %+v", g)
	}
	if g := want[9].Grant; g.Holder != "" || g.HolderExpiresIn <= 0 {
		t.Errorf("during the head's turn: %+v, want no holder and the turn's time left", g)
	}
	if g := want[11].Grant; !g.Acquired {
		t.Errorf("the head in its turn: %+v", g)
	}
	for _, b := range []*Backend{single, batched} {
		mustHolder(t, b, "busy", "")
		mustHolder(t, b, "turn", "head")
		if q := queued(t, b, "turn"); len(q) != 1 || q[0] != "w3-1" {
			t.Errorf("queue of turn: %q, want w3 alone", q)
		}
		if q := queued(t, b, "busy"); len(q) != 0 {
			t.Errorf("queue of busy: %q, want none", q)
		}
	}
}

// handOffWatch is a WatchHandOffs running in the background.
type handOffWatch struct {
	got   chan backend.HandOff
	ready chan struct{}
	stop  func() error
}

func startHandOffWatch(t *testing.T, b *Backend, addr string) *handOffWatch {
	t.Helper()
	w := &handOffWatch{got: make(chan backend.HandOff, 64), ready: make(chan struct{}, 64)}
	if b.cfg.watchIdle > time.Second {
		b.cfg.watchIdle = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.WatchHandOffs(ctx, addr, func(h backend.HandOff) { w.got <- h }, func() { w.ready <- struct{}{} })
	}()
	var (
		once   sync.Once
		result error
	)
	w.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(5 * time.Second):
				t.Error("WatchHandOffs did not return after its context ended")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = w.stop() })
	return w
}

func (w *handOffWatch) awaitReady(t *testing.T) {
	t.Helper()
	select {
	case <-w.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the hand-off watch never said it was ready")
	}
}

func (w *handOffWatch) await(t *testing.T) backend.HandOff {
	t.Helper()
	select {
	case h := <-w.got:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no hand-off notice")
	}
	return backend.HandOff{}
}

// A hand-off notice carries the name as spelled, the owner, the attempt, the
// new token and the latest poll number exactly, awkward text and the largest
// numbers included; other messages on the channel are dropped; the watch
// resubscribes after its connection is cut and says so.
func TestHandOffNotice(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	b := newTestBackend(t, redistest.NewClient(t, p.Addr()), withWatchHooks(300*time.Millisecond, nil))
	direct := redistest.NewClient(t, s.Addr())
	other, err := New(direct, WithKeyPrefix(b.cfg.prefix)) // another process, same prefix
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, other)
	addr := "mgr-" + newAttempt()
	w := startHandOffWatch(t, b, addr)
	w.awaitReady(t)
	ctx := ctxT(t)

	// Not a hand-off: logged and dropped, the watch goes on.
	if err := direct.Publish(ctx, b.HandOffChannel(addr), "junk").Err(); err != nil {
		t.Fatal(err)
	}
	// The calls go through other, straight to the server: only the watch
	// goes through the proxy.
	key, owner := "a {tagged}\nname 🔒", "ünïcödé owner"
	h := mustAcquire(t, other, key, "alice", time.Minute)
	waiter := newAttempt()
	mustQueue(t, other, key, owner, waiter, queueReq(addr, 1))
	mustQueue(t, other, key, owner, waiter, queueReq(addr, math.MaxUint64))
	if err := other.Release(ctx, h.release()); err != nil {
		t.Fatal(err)
	}
	got := w.await(t)
	now := mustHolder(t, other, key, owner)
	if got.Key != key || got.Owner != owner || got.Attempt != waiter || got.Token != now.Token || got.Token <= h.Token || got.Poll != math.MaxUint64 {
		t.Fatalf("hand-off %+v, want key %q, owner %q, attempt %s, token %d, poll %d", got, key, owner, waiter, now.Token, uint64(math.MaxUint64))
	}
	// The hand-off lasts the pickup window, and its metadata is the waiter's.
	if now.ExpiresIn <= 50*time.Second || now.Metadata != "m-"+owner {
		t.Errorf("handed-off holding %+v, want the waiter's metadata for its pickup window", now)
	}

	p.CutAll()
	w.awaitReady(t) // subscribed again
	h2 := mustAcquire(t, other, "after cut", "alice", time.Minute)
	mustQueue(t, other, "after cut", owner, newAttempt(), queueReq(addr, 5))
	if err := other.Release(ctx, h2.release()); err != nil {
		t.Fatal(err)
	}
	if got := w.await(t); got.Key != "after cut" || got.Poll != 5 {
		t.Fatalf("hand-off after the cut: %+v", got)
	}
	if err := w.stop(); err != nil {
		t.Fatalf("WatchHandOffs returned %v after its context ended", err)
	}
}

func TestWatchHandOffsRefuses(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	for _, addr := range []string{"", "with space", strings.Repeat("a", backend.MaxAddressBytes+1)} {
		if err := b.WatchHandOffs(ctxT(t), addr, func(backend.HandOff) {}, nil); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("WatchHandOffs(%q) = %v, want ErrInvalidRequest", addr, err)
		}
	}
	off := newTestBackend(t, c, WithReleaseNotifications(false))
	if err := off.WatchHandOffs(ctxT(t), "addr", func(backend.HandOff) {}, nil); !errors.Is(err, ErrNotificationsDisabled) {
		t.Errorf("WatchHandOffs with notifications off = %v", err)
	}
	// It still queues and hands on; it sends no notice (nobody could get it).
	ps := c.Subscribe(ctxT(t), off.HandOffChannel("addr"))
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	h := mustAcquire(t, off, "k", "alice", time.Minute)
	mustQueue(t, off, "k", "bob", newAttempt(), queueReq("addr", 1))
	if err := off.Release(ctxT(t), h.release()); err != nil {
		t.Fatal(err)
	}
	mustHolder(t, off, "k", "bob")
	if err := c.Publish(ctxT(t), off.HandOffChannel("addr"), "marker").Err(); err != nil {
		t.Fatal(err)
	}
	if msg, err := ps.ReceiveMessage(ctxT(t)); err != nil || msg.Payload != "marker" {
		t.Fatalf("first message on the hand-off channel: %v, %v; want only the marker", msg, err)
	}
}

// The queue's keys expire one entry TTL after the latest entry's expiry, so
// that a queue whose waiters all died vanishes; a queue that drains is
// deleted at once.
func TestQueueKeysExpire(t *testing.T) {
	// A server of its own, which publishes the expiries of its keys.
	s := redistest.Start(t, "--notify-keyspace-events", "Kx")
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	const entryTTL = 300 * time.Millisecond
	h := mustAcquire(t, b, "k", "alice", time.Minute)
	q := backend.QueueRequest{EntryTTL: entryTTL, Pickup: time.Minute}
	mustQueue(t, b, "k", "bob", newAttempt(), q)
	mustQueue(t, b, "k", "carol", newAttempt(), q)
	qk, ek := b.QueueKeys("k")
	for _, k := range []string{qk, ek} {
		if pttl := c.PTTL(ctx, k).Val(); pttl <= 0 || pttl > 2*entryTTL {
			t.Fatalf("%s: PTTL %v, want at most %v", k, pttl, 2*entryTTL)
		}
	}
	if n := c.HLen(ctx, ek).Val(); n != 4 { // two entries, "keys exp", "min exp"
		t.Errorf("entries hash has %d fields, want 4: %v", n, c.HGetAll(ctx, ek).Val())
	}
	// Nobody polls any more: the server's clock expires the keys, and the
	// server says so on their keyspace channels (one SUBSCRIBE: both are
	// subscribed once it is confirmed; an expiry before that, Exists sees).
	ps := c.Subscribe(ctx, "__keyspace@0__:"+qk, "__keyspace@0__:"+ek)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE: %v", err)
	}
	expired := ps.Channel()
	deadline := time.After(10 * time.Second)
	for {
		n, err := c.Exists(ctx, qk, ek).Result()
		if err != nil {
			t.Fatalf("EXISTS: %v", err)
		}
		if n == 0 {
			break
		}
		select {
		case <-expired:
		case <-deadline:
			t.Fatal("the abandoned queue's keys never expired")
		}
	}
	// The holding is not the queue's: it is still there, and its release
	// (it was marked) frees the name.
	if err := b.Release(ctx, h.release()); err != nil {
		t.Fatal(err)
	}
	mustHolder(t, b, "k", "")

	// A queue that drains goes at once.
	h = mustAcquire(t, b, "k", "alice", time.Minute)
	mustQueue(t, b, "k", "bob", newAttempt(), queueReq("", 1))
	if err := b.Release(ctx, h.release()); err != nil {
		t.Fatal(err)
	}
	mustHolder(t, b, "k", "bob")
	if n := c.Exists(ctx, qk, ek).Val(); n != 0 {
		t.Errorf("%d queue keys left after the queue drained", n)
	}
}

// A waiter that polls without an entry (a full queue, a backend with the
// queue off) still hears the release of the name after a hand-off: the
// hand-off keeps the mark of the holding it replaces.
func TestPollersStillHearReleasesAfterAHandOff(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	w := startWatch(t, b)
	w.awaitSubscribed(t)
	ctx := ctxT(t)
	h := mustAcquire(t, b, "k", "alice", time.Minute)
	waitFor(t, b, "k", "poller")
	bob := newAttempt()
	mustQueue(t, b, "k", "bob", bob, queueReq("", 1))
	if err := b.Release(ctx, h.release()); err != nil {
		t.Fatal(err)
	}
	g := mustAcquireAs(t, b, "k", "bob", bob, time.Minute) // the pickup
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatal(err)
	}
	// Exactly one announcement of k, before the marker's: the hand-off
	// itself announced nothing (messages on one connection keep order).
	releaseWaited(t, b, "marker")
	w.awaitKey(t, "k")
	w.awaitKey(t, "marker")
}

// A full queue counts its live entries only: expired ones are purged to make
// room, and a queue purged to nothing starts afresh, expiry included.
func TestFullQueuePurgesExpiredEntries(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	// Long enough that none expires while the queues fill, under -race.
	short := backend.QueueRequest{EntryTTL: time.Second, Pickup: time.Minute}
	for _, k := range []string{"half", "all"} {
		mustAcquire(t, b, k, "alice", time.Minute)
		for i := range backend.MaxQueueEntries {
			q := short
			if k == "half" && i%2 == 1 {
				q = queueReq("", 1)
			}
			mustQueue(t, b, k, "w", newAttempt(), q)
			if k == "all" && i == 0 {
				// An entry that leaves at once, after making the queue's
				// keys live long: they outlive every entry left.
				leaver := newAttempt()
				mustQueue(t, b, k, "leaver", leaver, queueReq("", 1))
				if err := b.Release(ctx, backend.ReleaseRequest{Key: k, Owner: "leaver", Attempt: leaver}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	late := newAttempt()
	if g, err := b.Acquire(ctx, queueOp("half", "late", late, queueReq("", 1)).Acquire); err != nil || g.Queued {
		t.Fatalf("beyond the bound: %+v, %v; want not queued", g, err)
	}
	time.Sleep(1100 * time.Millisecond) // let the server's clock pass the short entries' expiry
	mustQueue(t, b, "half", "late", late, queueReq("", 2))
	if n := len(queued(t, b, "half")); n != backend.MaxQueueEntries/2+1 {
		t.Errorf("%d entries after the purge, want %d", n, backend.MaxQueueEntries/2+1)
	}
	mustQueue(t, b, "all", "late", late, short)
	if q := queued(t, b, "all"); len(q) != 1 || q[0] != late {
		t.Errorf("queue of %d after purging every entry, want the late one alone", len(q))
	}
	qk, ek := b.QueueKeys("all")
	for _, k := range []string{qk, ek} {
		if pttl := c.PTTL(ctx, k).Val(); pttl <= 0 || pttl > 2*time.Minute {
			t.Errorf("%s: PTTL %v after the purge, want an expiry", k, pttl)
		}
	}
}

// A hand-off's token follows the acquire's rule, max(counter + 1, now_us);
// a counter that is not a token makes the release fail and changes nothing.
func TestHandOffToken(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	h := mustAcquire(t, b, "k", "alice", time.Minute)
	mustQueue(t, b, "k", "bob", newAttempt(), queueReq("", 1))
	ahead := uint64(serverTime(t, c).UnixMicro()) + 1e12
	if err := c.HSet(ctx, b.LeaseKey("k"), "token", itoa64(ahead)).Err(); err != nil {
		t.Fatal(err)
	}
	h.Token = ahead // the holding's token is the record's counter
	if err := b.Release(ctx, h.release()); err != nil {
		t.Fatal(err)
	}
	if got := mustHolder(t, b, "k", "bob"); got.Token != ahead+1 {
		t.Fatalf("hand-off token %d, want the counter + 1 = %d", got.Token, ahead+1)
	}

	h = mustAcquire(t, b, "bad", "alice", time.Minute)
	carol := newAttempt()
	mustQueue(t, b, "bad", "carol", carol, queueReq("", 1))
	if err := c.HSet(ctx, b.LeaseKey("bad"), "token", "not a token").Err(); err != nil {
		t.Fatal(err)
	}
	h.Token = 0 // whatever token: the release matches, the hand-off fails
	var reply goredis.Error
	if err := b.Release(ctx, h.release()); !errors.As(err, &reply) {
		t.Fatalf("release with a bad counter = %v, want the script's error", err)
	}
	if got := c.HMGet(ctx, b.LeaseKey("bad"), "owner", "att").Val(); got[0] != "alice" || got[1] != h.attempt {
		t.Errorf("record %v after the failed release, want alice's holding", got)
	}
	if q := queued(t, b, "bad"); len(q) != 1 || q[0] != carol {
		t.Errorf("queue %q after the failed release, want carol's entry", q)
	}
	if v := c.HGet(ctx, b.LeaseKey("bad"), "token").Val(); v != "not a token" {
		t.Errorf("counter %q, want it unchanged", v)
	}
}

// With the queue off, a backend queues nobody and says so, but honours the
// queue that other backends of its prefix keep.
func TestWaiterQueueOff(t *testing.T) {
	c := redistest.Client(t)
	on := newTestBackend(t, c)
	off, err := New(c, WithKeyPrefix(on.cfg.prefix), WithWaiterQueue(false))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, off)
	if off.Info().Queue || !on.Info().Queue {
		t.Fatalf("Info: off %+v, on %+v", off.Info(), on.Info())
	}
	h := mustAcquire(t, off, "k", "alice", time.Minute)
	if g, err := off.Acquire(ctxT(t), queueOp("k", "bob", newAttempt(), queueReq("", 1)).Acquire); err != nil || g.Queued {
		t.Fatalf("a queue request with the queue off: %+v, %v; want not queued", g, err)
	}
	mustQueue(t, on, "k", "carol", newAttempt(), queueReq("", 1))
	if err := off.Release(ctxT(t), h.release()); err != nil {
		t.Fatal(err)
	}
	mustHolder(t, off, "k", "carol")
}

// What the queue costs the paths that do not use it, counted by the server:
// an unmarked free record nothing (a name without a record one LINDEX), a
// refusal without a queue request nothing, a release nobody waits for
// nothing; and what the record's paths cost (a release's PEXPIREAT, which
// makes the name forgettable, and a free record's grant's PERSIST).
func TestQueueCostsTheOtherPathsLittle(t *testing.T) {
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
		delete(got, "config|resetstat")
		delete(got, "evalsha")
		delete(got, "eval")
		delete(got, "script|load")
		for cmd, n := range want {
			if got[cmd] != n {
				t.Errorf("%s: %d %s, want %d (all: %v)", what, got[cmd], cmd, n, got)
			}
		}
		for cmd := range got {
			if _, ok := want[cmd]; !ok {
				t.Errorf("%s: unexpected %s (all: %v)", what, cmd, got)
			}
		}
	}
	var h holding
	// A name never acquired: its record is made, after a look for the older
	// layout's counter and queue.
	count("acquire of a name without a record", map[string]int{"hmget": 1, "time": 1, "get": 1, "lindex": 1, "hset": 1}, func() {
		h = mustAcquire(t, b, "k", "alice", time.Minute)
	})
	count("refusal", map[string]int{"hmget": 1, "time": 1}, func() {
		mustBusy(t, b, "k", "bob", "alice")
	})
	count("release", map[string]int{"hmget": 1, "hset": 1, "pexpireat": 1}, func() {
		if err := b.Release(ctx, h.release()); err != nil {
			t.Fatal(err)
		}
	})
	count("acquire of a free name", map[string]int{"hmget": 1, "time": 1, "hset": 1, "persist": 1}, func() {
		h = mustAcquire(t, b, "k", "alice", time.Minute)
	})
	count("the same attempt again", map[string]int{"hmget": 1, "time": 1, "hset": 1}, func() {
		mustAcquireAs(t, b, "k", "alice", h.attempt, time.Minute)
	})
	count("renewal", map[string]int{"hmget": 1, "time": 1, "hset": 1}, func() {
		if _, err := b.Renew(ctx, h.renew(time.Minute)); err != nil {
			t.Fatal(err)
		}
	})
	count("inspection", map[string]int{"hmget": 1, "time": 1}, func() {
		mustHolder(t, b, "k", "alice")
	})
	waitFor(t, b, "k", "bob")
	count("release of a marked holding, no queue", map[string]int{"hmget": 1, "lindex": 1, "hset": 1, "publish": 1, "pexpireat": 1}, func() {
		if err := b.Release(ctx, h.release()); err != nil {
			t.Fatal(err)
		}
	})

	// And what the queue's own paths cost.
	h = mustAcquire(t, b, "k", "alice", time.Minute)
	carol := newAttempt()
	count("first queued refusal", map[string]int{"hmget": 2, "time": 1, "hset": 2, "llen": 1, "rpush": 1, "pexpireat": 2}, func() {
		mustQueue(t, b, "k", "carol", carol, queueReq("", 1))
	})
	count("queued poll", map[string]int{"hmget": 2, "time": 1, "hset": 1}, func() {
		mustQueue(t, b, "k", "carol", carol, queueReq("", 2))
	})
	count("release handing on", map[string]int{"hmget": 1, "lindex": 1, "hget": 1, "time": 1, "del": 1,
		"lpop": 1, "hdel": 1, "llen": 1, "hset": 1}, func() {
		if err := b.Release(ctx, h.release()); err != nil {
			t.Fatal(err)
		}
	})
}

// handOffsOnEveryMaster hands off one name on each master of the cluster
// behind cc, all to one address: each release runs on its name's master, and
// every notice reaches the one subscription, wherever the client made it.
func handOffsOnEveryMaster(t *testing.T, c *redistest.Cluster, cc *goredis.ClusterClient) {
	b := newTestBackend(t, cc)
	ctx := ctxT(t)
	masters := len(c.Masters(ctx))
	names := map[string]string{} // master address -> a name it serves
	for i := 0; len(names) < masters; i++ {
		if i > 10000 {
			t.Fatalf("no names found for all %d masters: %v", masters, names)
		}
		name := "handoff " + itoa(i)
		if addr := masterAddr(ctx, t, cc, b.LeaseKey(name)); names[addr] == "" {
			names[addr] = name
		}
	}
	addr := "mgr-" + newAttempt()
	w := startHandOffWatch(t, b, addr)
	w.awaitReady(t)
	want := map[string]string{} // name -> the waiter's attempt
	for _, name := range names {
		h := mustAcquire(t, b, name, "alice", time.Minute)
		want[name] = newAttempt()
		mustQueue(t, b, name, "bob", want[name], queueReq(addr, 1))
		if err := b.Release(ctx, h.release()); err != nil {
			t.Fatalf("release of %q: %v", name, err)
		}
	}
	for range names {
		got := w.await(t)
		if attempt, ok := want[got.Key]; !ok || got.Attempt != attempt || got.Owner != "bob" {
			t.Fatalf("hand-off %+v, want one of %v", got, want)
		}
		if h := mustHolder(t, b, got.Key, "bob"); h.Token != got.Token {
			t.Fatalf("hand-off of %q with token %d, holding %+v", got.Key, got.Token, h)
		}
		delete(want, got.Key)
	}
}
