package redis

import (
	"context"
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

func TestTokenIncreasesOnEveryNewGrantOnly(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	var last uint64
	for i := range 5 {
		owner := "owner-" + strconv.Itoa(i%2)
		before := serverTime(t, c)
		g := mustAcquire(t, b, "k", owner, time.Minute)
		if g.Token <= last {
			t.Fatalf("grant %d: token %d <= %d", i, g.Token, last)
		}
		if us := uint64(before.UnixMicro()); g.Token < us {
			t.Fatalf("grant %d: token %d below the server's time in µs (%d)", i, g.Token, us)
		}
		again := mustAcquireAs(t, b, "k", owner, g.attempt, time.Minute)
		r, err := b.Renew(ctx, g.renew(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if again.Token != g.Token || r.Token != g.Token {
			t.Fatalf("retry %d / renew %d changed token %d", again.Token, r.Token, g.Token)
		}
		if err := b.Release(ctx, g.release()); err != nil {
			t.Fatal(err)
		}
		last = g.Token
	}
	if n := counterOf(t, c, b, "k"); n != itoa64(last) {
		t.Fatalf("counter %s, last token %d", n, last)
	}
	if c.Exists(ctx, b.TokenKey("k")).Val() != 0 {
		t.Fatal("the older layout's counter key was written")
	}
}

// token = max(counter + 1, server time in µs), whatever state the counter is
// in: behind the clock (lost writes), ahead of it, or not a number; and
// whether it is the record's token or, for a name without a record, the
// older layout's counter key, which the grant then carries into the record.
func TestTokenIsMaxOfCounterAndClock(t *testing.T) {
	c := redistest.Client(t)
	b := newTestBackend(t, c)
	ctx := ctxT(t)
	setRecordToken := func(key, token string) {
		t.Helper()
		if err := c.HSet(ctx, b.LeaseKey(key), "token", token).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// Behind, as after a restart from an old snapshot: counter + 1 would be 6.
	if err := c.Set(ctx, b.TokenKey("behind"), "5", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := serverTime(t, c)
	g := mustAcquire(t, b, "behind", "alice", time.Minute)
	if us := uint64(before.UnixMicro()); g.Token < us {
		t.Fatalf("counter 5: token %d, want at least the server time %d µs", g.Token, us)
	}

	// Ahead of the clock (names granted faster than once a µs would do it).
	ahead := uint64(serverTime(t, c).UnixMicro()) + 1e12
	if err := c.Set(ctx, b.TokenKey("ahead"), itoa64(ahead), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if g := mustAcquire(t, b, "ahead", "alice", time.Minute); g.Token != ahead+1 {
		t.Fatalf("counter %d: token %d, want %d", ahead, g.Token, ahead+1)
	}
	if n := counterOf(t, c, b, "ahead"); n != itoa64(ahead+1) || c.Exists(ctx, b.TokenKey("ahead")).Val() != 0 {
		t.Fatalf("counter after the grant: %s, the older layout's key still there: %d", n, c.Exists(ctx, b.TokenKey("ahead")).Val())
	}

	// The same in a record: behind (a free record restored from an older
	// snapshot) and ahead.
	g = mustAcquire(t, b, "record", "alice", time.Minute)
	if err := b.Release(ctx, g.release()); err != nil {
		t.Fatal(err)
	}
	setRecordToken("record", "5")
	before = serverTime(t, c)
	if g := mustAcquire(t, b, "record", "bob", time.Minute); g.Token < uint64(before.UnixMicro()) {
		t.Fatalf("record's counter 5: token %d, want at least the server time %d µs", g.Token, before.UnixMicro())
	} else if err := b.Release(ctx, g.release()); err != nil {
		t.Fatal(err)
	}
	ahead = uint64(serverTime(t, c).UnixMicro()) + 1e12
	setRecordToken("record", itoa64(ahead))
	if g := mustAcquire(t, b, "record", "carol", time.Minute); g.Token != ahead+1 {
		t.Fatalf("record's counter %d: token %d, want %d", ahead, g.Token, ahead+1)
	}

	// Not a token: a fault naming the key, and nothing granted.
	for _, bad := range []string{"garbage", "9007199254740993"} {
		if err := c.Set(ctx, b.TokenKey("bad"), bad, 0).Err(); err != nil {
			t.Fatal(err)
		}
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "bad", Owner: "alice", Attempt: newAttempt(), TTL: time.Minute})
		var reply goredis.Error
		if !errors.As(err, &reply) || g.Acquired {
			t.Fatalf("counter %q: %+v, %v; want a Redis error", bad, g, err)
		}
		if n := c.Exists(ctx, b.LeaseKey("bad")).Val(); n != 0 || c.Get(ctx, b.TokenKey("bad")).Val() != bad {
			t.Fatalf("counter %q: a refused grant changed the store", bad)
		}
		h := mustAcquire(t, b, "bad record", "alice", time.Minute)
		if err := b.Release(ctx, h.release()); err != nil {
			t.Fatal(err)
		}
		setRecordToken("bad record", bad)
		stored := c.HGetAll(ctx, b.LeaseKey("bad record")).Val()
		g, err = b.Acquire(ctx, backend.AcquireRequest{Key: "bad record", Owner: "bob", Attempt: newAttempt(), TTL: time.Minute})
		if !errors.As(err, &reply) || g.Acquired {
			t.Fatalf("record's counter %q: %+v, %v; want a Redis error", bad, g, err)
		}
		if now := c.HGetAll(ctx, b.LeaseKey("bad record")).Val(); !maps.Equal(now, stored) {
			t.Fatalf("record's counter %q: a refused grant changed the record %v to %v", bad, stored, now)
		}
		c.Del(ctx, b.LeaseKey("bad record"))
	}
}

// The counter and the lease both gone (FLUSHALL, a restart without
// persistence): the clock still outbids every earlier token.
func TestTokensKeepIncreasingAfterDataLoss(t *testing.T) {
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	ctx := ctxT(t)

	g1 := mustAcquire(t, b, "k", "alice", time.Minute)
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	g2 := mustAcquire(t, b, "k", "bob", time.Minute)
	if g2.Token <= g1.Token {
		t.Fatalf("token after flush %d <= %d", g2.Token, g1.Token)
	}
	if _, err := b.Renew(ctx, g1.renew(time.Minute)); !isNotHeld(err) {
		t.Fatalf("renew of a flushed lease: %v", err)
	}

	restart(t, s, c)
	if _, err := b.Renew(ctx, g2.renew(time.Minute)); !isNotHeld(err) {
		t.Fatalf("renew after restart: %v", err)
	}
	g3 := mustAcquire(t, b, "k", "carol", time.Minute)
	if g3.Token <= g2.Token {
		t.Fatalf("token after restart %d <= %d", g3.Token, g2.Token)
	}
}

// Scenario 8: a restart from an older snapshot brings back a fence counter
// that is present but behind, and loses a live lease. The next grant must not
// repeat the lost holder's token, and within the restart grace nobody joins
// the holder that still believes it holds the name. (The unsynced last second
// of an everysec AOF, lost in a crash, leaves the same state.)
func TestRestartFromOldSnapshotNeitherRepeatsTokensNorDoublesHolders(t *testing.T) {
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	// plain has no grace: it sets the scene on the young test server, and
	// shows the token order after the restart.
	plain := newTestBackend(t, c)
	const grace = time.Minute // far longer than the test: no timing at stake
	guarded, err := New(c, WithKeyPrefix(plain.cfg.prefix), WithRestartGrace(grace))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, guarded)
	ctx := ctxT(t)

	alice := mustAcquire(t, plain, "k", "alice", time.Minute)
	if err := plain.Release(ctx, alice.release()); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	// Written after the snapshot: lost in the crash. bob holds k and will
	// believe so until his local deadline, up to a minute from now.
	bob := mustAcquire(t, plain, "k", "bob", time.Minute)

	restart(t, s, c)
	if n := counterOf(t, c, plain, "k"); n != itoa64(alice.Token) {
		t.Fatalf("restored counter %s, want the snapshot's %d", n, alice.Token)
	}
	if isHeld(t, c, plain, "k") {
		t.Fatal("bob's lease survived the restart: the scene is wrong")
	}

	g, err := guarded.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "carol", Attempt: newAttempt(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if g.Acquired {
		t.Fatalf("carol was granted k (token %d) within the restart grace, while bob (token %d) may still hold it",
			g.Token, bob.Token)
	}
	if g.Holder != "" || g.HolderToken != 0 || g.HolderExpiresIn <= 0 || g.HolderExpiresIn > grace+time.Second {
		t.Fatalf("refusal during the grace = %+v, want no holder and the rest of the grace", g)
	}
	if _, err := plain.Renew(ctx, bob.renew(time.Minute)); !isNotHeld(err) {
		t.Fatalf("bob's renewal after the restart: %v, want ErrNotHeld", err)
	}

	// Without a grace the name is granted, but never with a token issued
	// before: counter + 1 would be bob's token again.
	dave := mustAcquire(t, plain, "k", "dave", time.Minute)
	if dave.Token <= bob.Token {
		t.Fatalf("token after the restart %d <= bob's %d (counter restored at %d)", dave.Token, bob.Token, alice.Token)
	}
}

// A failover to a replica that missed the last grants: its counter is behind
// too, and the clock keeps tokens increasing. The grant it missed is lost
// (the old primary's holder and the new one's overlap) unless grants are
// confirmed by the replica first: WithReplicaConfirmation.
func TestFailoverToLaggingReplica(t *testing.T) {
	primary, replica := startReplicated(t)
	pc, rc := redistest.NewClient(t, primary.Addr()), redistest.NewClient(t, replica.Addr())
	bp := newTestBackend(t, pc)
	ctx := ctxT(t)

	alice := mustAcquire(t, bp, "k", "alice", time.Minute)
	if err := bp.Release(ctx, alice.release()); err != nil {
		t.Fatal(err)
	}
	if n, err := pc.Do(ctx, "WAIT", 1, 5000).Int64(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}
	// The replica stops following here: everything after is what it lags.
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	bob := mustAcquire(t, bp, "k", "bob", time.Minute)

	// With confirmation, the grant the replica would miss is not reported.
	confirmed, err := New(pc, WithKeyPrefix(bp.cfg.prefix), WithReplicaConfirmation(1, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, confirmed)
	ng, err := confirmed.Acquire(ctx, backend.AcquireRequest{Key: "other", Owner: "bob", Attempt: newAttempt(), TTL: time.Minute})
	if !errors.Is(err, ErrNotConfirmed) || ng.Acquired {
		t.Fatalf("grant no replica acknowledged = %+v, %v; want ErrNotConfirmed", ng, err)
	}

	// Failover: clients move to the promoted replica.
	br, err := New(rc, WithKeyPrefix(bp.cfg.prefix))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, br)
	if n := counterOf(t, rc, br, "k"); n != itoa64(alice.Token) {
		t.Fatalf("promoted replica's counter %s, want alice's %d", n, alice.Token)
	}
	carol := mustAcquire(t, br, "k", "carol", time.Minute)
	if carol.Token <= bob.Token {
		t.Fatalf("token on the promoted replica %d <= bob's %d", carol.Token, bob.Token)
	}
}

// With a restart grace, a young server grants no free name, whether its
// counter is missing (never used, or lost) or present (restored from an older
// snapshot); a live holding is reported as usual and its own attempt keeps
// working. Once the server is older than the grace, free names are granted.
func TestRestartGraceHoldsBackFreeNamesOnAYoungServer(t *testing.T) {
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

	used := mustAcquire(t, plain, "used", "alice", time.Minute)
	if err := plain.Release(ctx, used.release()); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"fresh", "used"} {
		g, err := guarded.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: "bob", Attempt: newAttempt(), TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if g.Acquired || g.Holder != "" || g.HolderToken != 0 {
			t.Fatalf("%s: acquire on a young server = %+v, want refused with no holder", k, g)
		}
		// The script's estimate of the start is up to a second late.
		if g.HolderExpiresIn <= 0 || g.HolderExpiresIn > grace+time.Second {
			t.Fatalf("%s: HolderExpiresIn %v, want the rest of a %v grace", k, g.HolderExpiresIn, grace)
		}
		if end := serverTime(t, c).Add(grace + time.Second); g.HolderExpiresAt.After(end) {
			t.Fatalf("%s: grace ends %v, after the server's time + grace %v", k, g.HolderExpiresAt, end)
		}
		if isHeld(t, c, plain, k) {
			t.Fatalf("%s: a refused acquire wrote a lease", k)
		}
	}
	if c.Exists(ctx, plain.LeaseKey("fresh"), plain.TokenKey("fresh")).Val() != 0 || counterOf(t, c, plain, "used") != itoa64(used.Token) {
		t.Fatal("a refused acquire changed a counter")
	}

	held := mustAcquire(t, plain, "held", "carol", time.Minute)
	if busy := mustBusy(t, guarded, "held", "dave", "carol"); busy.HolderToken != held.Token {
		t.Fatalf("refusal names token %d, holder has %d", busy.HolderToken, held.Token)
	}
	if again := mustAcquireAs(t, guarded, "held", "carol", held.attempt, time.Minute); again.Token != held.Token {
		t.Fatalf("the holder's retry during the grace got token %d, had %d", again.Token, held.Token)
	}
	if _, err := guarded.Renew(ctx, held.renew(time.Minute)); err != nil {
		t.Fatalf("renew during the grace: %v", err)
	}

	short, err := New(c, WithKeyPrefix(plain.cfg.prefix), WithRestartGrace(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, short)
	waitGraceOver(t, s, time.Second)
	if g := mustAcquire(t, short, "used", "erin", time.Minute); g.Token <= used.Token {
		t.Fatalf("token after the grace %d <= %d", g.Token, used.Token)
	}
}

// The grace counts from the server's start and is never shorter than asked,
// even though the uptime the script reads is a difference of whole seconds
// (it reads 1 a few milliseconds after a start late in a second).
func TestRestartGraceIsNeverShorterThanAsked(t *testing.T) {
	const grace = time.Second
	started := time.Now() // before the server's start: the real start is later
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c, WithRestartGrace(grace))
	ctx := ctxT(t)
	for {
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "alice", Attempt: newAttempt(), TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if g.Acquired {
			// The grant's server time, to the millisecond it was rounded down to.
			grantedAt := g.ExpiresAt.Add(-time.Minute)
			if early := started.Add(grace).Sub(grantedAt); early > time.Millisecond {
				t.Fatalf("granted %v before the end of a %v grace counted from before the server started", early, grace)
			}
			return
		}
		// Ask again at once, as any other client may at any moment: the
		// moment that matters is the first one the script grants at.
		time.Sleep(5 * time.Millisecond)
	}
}

// A server where scripts may not call INFO cannot apply the grace while it
// needs INFO (here: always, the server being younger than the grace): acquire
// fails with an error that says so, instead of granting.
func TestRestartGraceWithoutInfoIsAFault(t *testing.T) {
	s := redistest.Start(t, "--rename-command", "INFO", "")
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c, WithRestartGrace(time.Minute))
	g, err := b.Acquire(ctxT(t), backend.AcquireRequest{Key: "k", Owner: "alice", Attempt: newAttempt(), TTL: time.Minute})
	if err == nil || g.Acquired {
		t.Fatalf("acquire with INFO disabled = %+v, %v; want a fault", g, err)
	}
	if !strings.Contains(err.Error(), "restart grace needs INFO") {
		t.Fatalf("error does not say why: %v", err)
	}
}

// restart kills s and starts it again (from its snapshot, if a SAVE wrote
// one), and waits until each client gets an answer again: their pooled
// connections died with the server.
func restart(t *testing.T, s *redistest.Server, clients ...*goredis.Client) {
	t.Helper()
	s.Restart()
	for _, c := range clients {
		var err error
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = c.Ping(ctx).Err()
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("no answer after the restart: %v", err)
		}
	}
}

// waitGraceOver waits until a restart grace of d no longer holds anything
// back on s: until the server's uptime_in_seconds, as the acquire script reads
// it, is past d plus the second the script adds.
func waitGraceOver(t *testing.T, s *redistest.Server, d time.Duration) {
	t.Helper()
	c := redistest.NewClient(t, s.Addr())
	need := int((d + 2*time.Second - 1) / time.Second) // ceil(d/1s) + 1
	deadline := time.Now().Add(d + 30*time.Second)
	for time.Now().Before(deadline) {
		info, err := c.InfoMap(ctxT(t), "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		up, _ := strconv.Atoi(info["Server"]["uptime_in_seconds"])
		if up >= need {
			return
		}
		// Uptime has no signal: poll, a few times a second.
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("a grace of %v never ended", d)
}
