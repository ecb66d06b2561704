package redis

import (
	"context"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"
)

// pipeClient is what a pipeline of script calls runs on: the caller's client
// (a *goredis.ClusterClient splits its pipelines by node), or under replica
// confirmation the one client of a primary, whose pipeline is one connection.
// Its Scripter side loads the scripts a server has forgotten.
type pipeClient interface {
	Pipeline() goredis.Pipeliner
	goredis.Scripter
}

// runPipeline sends calls by SHA in one pipeline on via, followed by one WAIT
// when wait is set and a call needs confirming (WAIT counts the replicas that
// acknowledged every earlier write of its connection, so one speaks for the
// whole pipeline), and leaves each call's outcome in it.
//
// A server that does not know a script (it restarted or failed over, or its
// cache was flushed) answers NOSCRIPT and runs nothing: the scripts are loaded
// through via, and the calls refused are sent again, in their order, in a
// second pipeline with its own WAIT. A refused call is not sent again when a
// later call on one of its names did run (only a flush, or another client's
// load of the script, in the middle of the pipeline can do that): it would
// run out of order, so it keeps its error, which the caller treats as a
// fault.
func (b *Backend) runPipeline(ctx context.Context, via pipeClient, calls []*scriptCall, wait bool) {
	pending := calls
	for attempt := 0; ; attempt++ {
		p := via.Pipeline()
		confirm := false
		for _, c := range pending {
			c.cmd = c.script.EvalSha(ctx, p, c.keys, c.args...)
			confirm = confirm || c.confirm
		}
		var waitCmd *goredis.Cmd
		if wait && confirm {
			waitCmd = p.Do(ctx, "WAIT", b.cfg.replicas, ttlMillis(b.cfg.confirmTimeout))
		}
		// Exec reports only the first failure; each command keeps its own.
		_, _ = p.Exec(ctx)
		if waitCmd != nil {
			acked, err := waitCmd.Int64()
			for _, c := range pending {
				c.acked, c.waitErr = acked, err
			}
		}
		if attempt > 0 {
			return
		}
		pending = refusedForNoScript(pending)
		if len(pending) == 0 {
			return
		}
		if err := loadScripts(ctx, via, pending); err != nil {
			for _, c := range pending {
				c.fail(ctx, fmt.Errorf("the server did not know the script, and loading it failed: %w", err))
			}
			return
		}
	}
}

// refusedForNoScript returns, in order, the calls refused with NOSCRIPT that
// no later call on any of the same names overtook.
func refusedForNoScript(calls []*scriptCall) []*scriptCall {
	noScript := func(c *scriptCall) bool { return goredis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") }
	if !slices.ContainsFunc(calls, noScript) {
		return nil // the usual case: no set of the names to build
	}
	var (
		refused []*scriptCall
		ran     = map[string]bool{}
	)
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		if !noScript(c) {
			for _, name := range c.nameList() {
				ran[name] = true
			}
			continue
		}
		if !slices.ContainsFunc(c.nameList(), func(name string) bool { return ran[name] }) {
			refused = append(refused, c)
		}
	}
	slices.Reverse(refused)
	return refused
}

// nameList returns the names c works on.
func (c *scriptCall) nameList() []string {
	if c.names != nil {
		return c.names
	}
	return []string{c.name}
}

// loadScripts loads every script calls use, once each, on the server that
// runs them: through a ClusterClient, on the master of each call's slot alone
// (the client's own SCRIPT LOAD goes to every master, and waits for one that
// does not answer, holding back the calls on the live ones).
func loadScripts(ctx context.Context, via goredis.Scripter, calls []*scriptCall) error {
	type load struct {
		script *goredis.Script
		on     goredis.Scripter
	}
	cc, cluster := via.(*goredis.ClusterClient)
	var done []load
	for _, c := range calls {
		l := load{c.script, via}
		if cluster {
			node, err := cc.MasterForKey(ctx, c.keys[0])
			if err != nil {
				return fmt.Errorf("SCRIPT LOAD: %w", err)
			}
			l.on = node
		}
		if slices.Contains(done, l) {
			continue
		}
		if err := c.script.Load(ctx, l.on).Err(); err != nil {
			return fmt.Errorf("SCRIPT LOAD: %w", err)
		}
		done = append(done, l)
	}
	return nil
}
