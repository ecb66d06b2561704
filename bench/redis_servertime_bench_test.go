package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	lhredis "github.com/leasehold/leasehold/backend/redis"
)

// BenchmarkRedisScriptServerTime measures what each script costs the Redis
// server, the figure that the wall clock of a loaded machine hides: the
// microseconds per call that INFO commandstats counts for EVALSHA, for each
// kind of call in isolation (commandstats lumps all scripts together, so the
// calls of one kind run as a run of their own, between two reads of the
// counters), with redislock's two scripts beside. Run it against a private
// server (LEASEHOLD_REDIS_ADDR): any other client's scripts would be counted
// too. Each iteration is one call of every kind; the metrics are
// server-µs per call ("acquire", "release", ...) and per cycle (acquire +
// release), and µs of each command the scripts called, per acquire and per
// release ("acquire-hmget", ...).
func BenchmarkRedisScriptServerTime(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	be, err := lhredis.New(c, lhredis.WithKeyPrefix("lhbench-server:"))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	locker := redislock.New(c)

	const chunk = 1000
	names := make([]string, chunk)
	for i := range names {
		names[i] = "job-" + strconv.Itoa(i)
	}
	tokens := make([]uint64, chunk)
	locks := make([]*redislock.Lock, chunk)
	ttl := 30 * time.Second
	acquire := func(i int, owner string) (backend.Grant, error) {
		return be.Acquire(ctx, backend.AcquireRequest{Key: names[i], Owner: owner, Attempt: owner, TTL: ttl})
	}
	// Each kind of call: what one call of it does for name i.
	kinds := []struct {
		name string
		op   func(i int) error
	}{
		{"acquire", func(i int) error {
			g, err := acquire(i, "bench")
			if err == nil && !g.Acquired {
				err = errors.New("acquire refused")
			}
			tokens[i] = g.Token
			return err
		}},
		{"acquire-again", func(i int) error {
			g, err := acquire(i, "bench")
			if err == nil && !g.Acquired {
				err = errors.New("acquire again refused")
			}
			return err
		}},
		{"renew", func(i int) error {
			_, err := be.Renew(ctx, backend.RenewRequest{Key: names[i], Owner: "bench", Attempt: "bench", Token: tokens[i], TTL: ttl})
			return err
		}},
		{"refused", func(i int) error {
			g, err := acquire(i, "other")
			if err == nil && g.Acquired {
				err = errors.New("acquire of a held name granted")
			}
			return err
		}},
		{"inspect", func(i int) error {
			_, _, err := be.Inspect(ctx, names[i])
			return err
		}},
		{"release", func(i int) error {
			return be.Release(ctx, backend.ReleaseRequest{Key: names[i], Owner: "bench", Attempt: "bench", Token: tokens[i]})
		}},
		{"redislock-obtain", func(i int) error {
			l, err := locker.Obtain(ctx, "lhbench-server-redislock:"+names[i], ttl, nil)
			locks[i] = l
			return err
		}},
		{"redislock-release", func(i int) error {
			return locks[i].Release(ctx)
		}},
	}
	// The run's first chunk loads the scripts and creates the counters:
	// not counted.
	total := map[string]map[string]cmdStat{}
	calls := map[string]int{}
	b.ResetTimer()
	for done, warm := 0, true; done < b.N || warm; {
		n := min(chunk, max(b.N-done, 1))
		for _, k := range kinds {
			before := commandStats(b, c)
			for i := range n {
				if err := k.op(i); err != nil {
					b.Fatalf("%s %s: %v", k.name, names[i], err)
				}
			}
			if warm {
				continue
			}
			after := commandStats(b, c)
			if total[k.name] == nil {
				total[k.name] = map[string]cmdStat{}
			}
			for cmd, s := range after {
				d := s.minus(before[cmd])
				if cmd == "info" || d.calls == 0 {
					continue
				}
				t := total[k.name][cmd]
				total[k.name][cmd] = cmdStat{t.calls + d.calls, t.usec + d.usec}
			}
			calls[k.name] += n
		}
		if warm {
			warm = false
			continue
		}
		done += n
	}
	b.StopTimer()
	per := func(kind, cmd string) float64 {
		return float64(total[kind][cmd].usec) / float64(calls[kind])
	}
	for _, k := range kinds {
		if got := total[k.name]["evalsha"].calls; got != int64(calls[k.name]) {
			b.Fatalf("%s: %d EVALSHA for %d calls: is another client using the server?", k.name, got, calls[k.name])
		}
		b.ReportMetric(per(k.name, "evalsha"), "µs/"+k.name)
	}
	b.ReportMetric(per("acquire", "evalsha")+per("release", "evalsha"), "µs/cycle")
	b.ReportMetric(per("redislock-obtain", "evalsha")+per("redislock-release", "evalsha"), "µs/redislock-cycle")
	for _, kind := range []string{"acquire", "release"} {
		for cmd := range total[kind] {
			if cmd != "evalsha" {
				b.ReportMetric(per(kind, cmd), "µs/"+kind+"-"+cmd)
			}
		}
	}
}

// cmdStat is one command's line of INFO commandstats: calls and usec.
type cmdStat struct{ calls, usec int64 }

func (s cmdStat) minus(o cmdStat) cmdStat { return cmdStat{s.calls - o.calls, s.usec - o.usec} }

// commandStats reads INFO commandstats: command name -> its counters.
func commandStats(b *testing.B, c *goredis.Client) map[string]cmdStat {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	stats := map[string]cmdStat{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		var s cmdStat
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls = n
			case "usec":
				s.usec = n
			}
		}
		stats[name] = s
	}
	return stats
}
