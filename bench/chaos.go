package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/internal/faultproxy"
)

// Chaos actions accepted by -chaos.
const (
	chaosRestart = "restart" // kill the bench's own redis-server and start it again, empty
	chaosCut     = "cut"     // cut every connection through the bench's TCP proxy
	chaosPause   = "pause"   // SIGSTOP a worker process that holds a name, for 1.5×TTL, then SIGCONT
)

// chaosPlan is what chaos may act on in a run.
type chaosPlan struct {
	actions []string
	redis   *ownRedis         // restart target (redis backend)
	proxy   *faultproxy.Proxy // cut target
	pg      *pgxpool.Pool     // for pg_terminate_backend of the bench's connections
	down    time.Duration     // how long a restarted server stays down
}

// run spreads the actions evenly over the run (between 15% and 85% of it)
// and returns what it did, with times relative to the start. It returns
// early when stop is closed.
func (p *chaosPlan) run(stop <-chan struct{}, cfg runConfig, rec *sharedRecord, pids []int, start, end int64) []string {
	var log []string
	n := len(p.actions)
	for i, a := range p.actions {
		at := start + int64(float64(end-start)*(0.15+0.7*float64(i)/float64(max(1, n-1))))
		if n == 1 {
			at = start + (end-start)/3
		}
		select {
		case <-stop:
			return log
		case <-time.After(time.Duration(at - monoNow())):
		}
		t := time.Duration(monoNow() - start).Round(time.Millisecond)
		log = append(log, fmt.Sprintf("t=%v %s", t, p.act(stop, a, cfg, rec, pids)))
	}
	return log
}

func (p *chaosPlan) act(stop <-chan struct{}, a string, cfg runConfig, rec *sharedRecord, pids []int) string {
	ctx := context.Background()
	switch a {
	case chaosRestart:
		if p.redis == nil {
			return "restart: skipped (only the bench's own redis-server can be restarted)"
		}
		t0 := time.Now()
		if err := p.redis.restart(ctx, p.down); err != nil {
			return "restart: " + err.Error()
		}
		return fmt.Sprintf("restart: redis-server killed and started empty, back after %v", time.Since(t0).Round(time.Millisecond))
	case chaosCut:
		switch {
		case p.proxy != nil:
			return fmt.Sprintf("cut: %d connections through the proxy closed", p.proxy.CutAll())
		case p.pg != nil:
			var n int
			err := p.pg.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = $1 AND pid <> pg_backend_pid()`, benchAppName).Scan(&n)
			if err != nil {
				return "cut: " + err.Error()
			}
			return fmt.Sprintf("cut: %d of the bench's PostgreSQL connections terminated", n)
		}
		return "cut: skipped (no proxy)"
	case chaosPause:
		if len(pids) == 0 || pids[0] == 0 {
			return "pause: skipped (workers run in this process)"
		}
		// Pause a process while it holds a name: that is the case that
		// matters. A stopped process's record is frozen, so stop a holder,
		// then look again, and let it go and try another moment when it had
		// just released.
		victim, holding := -1, false
		for try := 0; try < 200 && !holding; try++ {
			holders := rec.holders()
			if len(holders) == 0 {
				time.Sleep(time.Millisecond)
				continue
			}
			victim = holders[rand.IntN(len(holders))]
			if err := syscall.Kill(pids[victim], syscall.SIGSTOP); err != nil {
				return "pause: " + err.Error()
			}
			if holding = slices.Contains(rec.holders(), victim); !holding {
				_ = syscall.Kill(pids[victim], syscall.SIGCONT)
			}
		}
		if victim < 0 {
			victim = rand.IntN(len(pids))
		}
		if !holding {
			if err := syscall.Kill(pids[victim], syscall.SIGSTOP); err != nil {
				return "pause: " + err.Error()
			}
		}
		pause := cfg.TTL * 3 / 2
		select {
		case <-stop:
		case <-time.After(pause):
		}
		if err := syscall.Kill(pids[victim], syscall.SIGCONT); err != nil {
			return "pause: SIGCONT: " + err.Error()
		}
		return fmt.Sprintf("pause: process %d stopped for %v (holding: %v), then continued", victim, pause, holding)
	}
	return a + ": unknown action"
}
