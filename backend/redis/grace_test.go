package redis

import (
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// commandCalls reads from INFO commandstats how often the server ran each
// command (commands called by scripts included) since the last CONFIG
// RESETSTAT. The INFO that reads them counts only in the next reading.
func commandCalls(t *testing.T, c *goredis.Client) map[string]int {
	t.Helper()
	stats, err := c.Info(ctxT(t), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(stats, "\n") {
		cmd, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if ok {
			calls[cmd], _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	return calls
}

// On a server older than the grace, a grant reads LASTSAVE (the server's
// start, or its last save) and skips INFO; when LASTSAVE is less than the
// grace ago, INFO decides. (That a young server grants nothing is
// TestRestartGraceHoldsBackFreeNamesOnAYoungServer: there LASTSAVE is the
// start, recent, and INFO decides.)
func TestRestartGraceSkipsInfoWhileLastSaveIsOld(t *testing.T) {
	s := redistest.Start(t) // its own server: the test reads and resets its statistics
	c := redistest.NewClient(t, s.Addr())
	const grace = time.Second
	b := newTestBackend(t, c, WithRestartGrace(grace))
	ctx := ctxT(t)
	waitGraceOver(t, s, grace) // uptime >= 2 s: LASTSAVE (the start) is 2 s old

	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, "a", "alice", time.Minute)
	if n := commandCalls(t, c); n["lastsave"] != 1 || n["info"] != 0 {
		t.Errorf("a grant on a server up for longer than the grace called LASTSAVE %d times, INFO %d times; want 1 and 0",
			n["lastsave"], n["info"])
	}
	mustBusy(t, b, "a", "bob", "alice")                                // a refusal reads neither
	if n := commandCalls(t, c); n["lastsave"] != 1 || n["info"] != 1 { // the INFO above
		t.Errorf("a refusal called LASTSAVE or INFO: %d and %d calls in all, want 1 and 1", n["lastsave"], n["info"])
	}

	// A save less than the grace ago (a minute: surely) says nothing about
	// the start: INFO decides, and finds the server younger than that.
	long, err := New(c, WithKeyPrefix(b.cfg.prefix), WithRestartGrace(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, long)
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	g, err := long.Acquire(ctx, backend.AcquireRequest{Key: "b", Owner: "alice", Attempt: newAttempt(), TTL: time.Minute})
	if err != nil || g.Acquired {
		t.Fatalf("acquire within a minute of the start: %+v, %v; want refused", g, err)
	}
	if n := commandCalls(t, c); n["lastsave"] != 1 || n["info"] != 1 {
		t.Errorf("a grant after a recent save called LASTSAVE %d times, INFO %d times; want 1 and 1", n["lastsave"], n["info"])
	}
}
