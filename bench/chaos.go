package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/internal/faultproxy"
)

// Chaos actions accepted by -chaos.
const (
	chaosRestart = "restart" // kill the bench's own redis-server (start it again, empty) or MariaDB (start it again on its data)
	chaosCut     = "cut"     // cut every connection through the bench's TCP proxy
	chaosPause   = "pause"   // SIGSTOP a worker process that holds a name, for 1.5×TTL, then SIGCONT
	chaosKill    = "kill"    // SIGKILL a worker process that waits for the hot name and holds none; the others go on
)

// procSet is a set of worker processes (by number) shared by the chaos
// goroutine and the parent collecting results.
type procSet struct {
	mu sync.Mutex
	m  map[int]bool
}

func (s *procSet) add(p int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int]bool{}
	}
	s.m[p] = true
}

func (s *procSet) remove(p int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, p)
}

func (s *procSet) has(p int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[p]
}

// chaosPlan is what chaos may act on in a run.
type chaosPlan struct {
	actions []string
	redis   *ownRedis         // restart target (redis backend)
	mysql   *ownMySQL         // restart target (mysql backend)
	proxy   *faultproxy.Proxy // cut target
	pg      *pgxpool.Pool     // for pg_terminate_backend of the bench's connections
	down    time.Duration     // how long a restarted server stays down
}

// run spreads the actions evenly over the run (between 15% and 85% of it)
// and returns what it did, with times relative to the start. It returns
// early when stop is closed. A process it kills is added to killed before
// the signal is sent.
func (p *chaosPlan) run(stop <-chan struct{}, cfg runConfig, rec *sharedRecord, pids []int, killed *procSet, start, end int64) []string {
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
		log = append(log, fmt.Sprintf("t=%v %s", t, p.act(stop, a, cfg, rec, pids, killed, end)))
	}
	return log
}

func (p *chaosPlan) act(stop <-chan struct{}, a string, cfg runConfig, rec *sharedRecord, pids []int, killed *procSet, end int64) string {
	ctx := context.Background()
	switch a {
	case chaosRestart:
		if p.mysql != nil {
			t0 := time.Now()
			if err := p.mysql.restart(ctx, p.down); err != nil {
				return "restart: " + err.Error()
			}
			return fmt.Sprintf("restart: MariaDB killed (SIGKILL) and recovered from its data, back after %v", time.Since(t0).Round(time.Millisecond))
		}
		if p.redis == nil {
			return "restart: skipped (only the bench's own redis-server or MariaDB can be restarted)"
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
			holders := slices.DeleteFunc(rec.holders(), killed.has)
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
			alive := living(len(pids), killed)
			victim = alive[rand.IntN(len(alive))]
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
	case chaosKill:
		return killWaiter(stop, rec, pids, killed, end)
	}
	return a + ": unknown action"
}

// living lists the processes not killed.
func living(procs int, killed *procSet) []int {
	var ps []int
	for p := range procs {
		if !killed.has(p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// killWaiter kills (SIGKILL) a process that waits for the hot name and holds
// no name, so that only pending acquisitions end with it: what the store's
// waiter queue must survive (a dead contender's entry, or a hand-off it
// will never pick up). As for pause, the record of a stopped process is
// frozen: stop a candidate, look again, and kill it only if it still waits
// without holding; otherwise let it go and try another moment. A grant on
// its way back to the process cannot be seen; should one be, the name stays
// taken until that holding expires. The last process alive is never killed.
func killWaiter(stop <-chan struct{}, rec *sharedRecord, pids []int, killed *procSet, end int64) string {
	if len(pids) == 0 || pids[0] == 0 {
		return "kill: skipped (workers run in this process)"
	}
	for monoNow() < end {
		if len(living(len(pids), killed)) < 2 {
			return "kill: skipped (one worker process left)"
		}
		cands := slices.DeleteFunc(rec.waitersNotHolding(), killed.has)
		if len(cands) == 0 {
			select {
			case <-stop:
				return "kill: skipped (the run ended)"
			case <-time.After(time.Millisecond): // the record has no signal to wait for
			}
			continue
		}
		victim := cands[rand.IntN(len(cands))]
		if err := syscall.Kill(pids[victim], syscall.SIGSTOP); err != nil {
			return "kill: " + err.Error()
		}
		if !slices.Contains(rec.waitersNotHolding(), victim) {
			_ = syscall.Kill(pids[victim], syscall.SIGCONT)
			continue
		}
		// Whether another process held a name then: if none did, a grant
		// to the victim may have been on its way.
		held := "no process held a name then"
		if hs := slices.DeleteFunc(rec.holders(), killed.has); len(hs) > 0 {
			held = fmt.Sprintf("process %d held a name then", hs[0])
		}
		// Marked before the signal: the parent, reading the worker's end
		// of the pipe, must know the process was killed on purpose.
		killed.add(victim)
		if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
			killed.remove(victim)
			_ = syscall.Kill(pids[victim], syscall.SIGCONT)
			return "kill: " + err.Error()
		}
		return fmt.Sprintf("kill: process %d killed (SIGKILL) while waiting for name %d and holding none (%s); the run goes on without it", victim, hotKey, held)
	}
	return "kill: skipped (no process waited for the hot name without holding one before the run ended)"
}
