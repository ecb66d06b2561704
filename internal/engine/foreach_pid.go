package engine

import (
	"runtime"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// forEachPID calls fn for every pid, spread over one goroutine per core, and
// returns when all calls have. A lease actor runs on the goroutine that
// sends it a message while it is idle (dispatcher.go), so telling a million
// of them something from one goroutine runs them all on it, one after
// another: Close then took tens of seconds on one core.
func forEachPID(pids []*actor.PID, fn func(*actor.PID)) {
	n := min(runtime.GOMAXPROCS(0), max(len(pids)/forEachMin, 1))
	if n <= 1 {
		for _, pid := range pids {
			fn(pid)
		}
		return
	}
	var wg sync.WaitGroup
	per := (len(pids) + n - 1) / n
	for i := 0; i < len(pids); i += per {
		part := pids[i:min(i+per, len(pids))]
		wg.Go(func() {
			for _, pid := range part {
				fn(pid)
			}
		})
	}
	wg.Wait()
}

// forEachMin is the fewest actors worth a goroutine of their own.
const forEachMin = 1024
