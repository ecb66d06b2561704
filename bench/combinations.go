package main

import (
	"fmt"
	"maps"
	"slices"
)

// checkCombinations refuses a command line that could not run as asked,
// before anything runs: every run it would start is validated, chaos must
// have something to act on, and flags that the chosen mode would ignore are
// an error rather than a surprise at the end. set holds the flags given.
func checkCombinations(f *cliFlags, set map[string]bool) error {
	switch {
	case f.replot != "":
		return onlyFlags(set, "-replot", "replot", "format", "report", "quiet")
	case f.scale > 0:
		if err := onlyFlags(set, "-scale", "scale", "backend", "redis", "postgres", "locks", "ttl", "renew", "duration", "format", "quiet", "cpuprofile"); err != nil {
			return err
		}
		_, err := scaleConfigFrom(f)
		return err
	case set["renew"]:
		return fmt.Errorf("%w: -renew applies to -scale only", errConfig)
	case set["cpuprofile"]:
		return fmt.Errorf("%w: -cpuprofile applies to -scale only", errConfig)
	}
	for _, procs := range f.procs {
		for _, lock := range f.locks {
			c := f.base
			c.Lock, c.Procs = lock, procs
			if err := c.validate(); err != nil {
				return err
			}
		}
	}
	b := f.base.Backend
	for _, a := range f.chaos {
		switch {
		case a == chaosRestart && b != backendRedis && b != backendMySQL:
			return fmt.Errorf("%w: -chaos restart: only with -backend redis or mysql (the bench restarts a server of its own)", errConfig)
		case a == chaosCut && b != backendRedis && b != backendPostgres && b != backendMySQL:
			return fmt.Errorf("%w: -chaos cut: only with -backend redis, postgres or mysql", errConfig)
		case a == chaosPause && f.inProcess:
			return fmt.Errorf("%w: -chaos pause stops a worker process: drop -inprocess", errConfig)
		case a == chaosKill && f.inProcess:
			return fmt.Errorf("%w: -chaos kill kills a worker process: drop -inprocess", errConfig)
		case a == chaosKill && slices.Min(f.procs) < 2:
			return fmt.Errorf("%w: -chaos kill with -procs %d: the run goes on with the other processes, so it needs -procs 2 or more", errConfig, slices.Min(f.procs))
		}
	}
	return nil
}

// onlyFlags refuses any flag given outside allowed, naming mode as what
// ignores it.
func onlyFlags(set map[string]bool, mode string, allowed ...string) error {
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if set[name] && !slices.Contains(allowed, name) {
			return fmt.Errorf("%w: -%s does not apply with %s", errConfig, name, mode)
		}
	}
	return nil
}
