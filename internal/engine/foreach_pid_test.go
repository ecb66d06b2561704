package engine

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// forEachPID calls its function once for every pid, however the pids are split.
func TestForEachPIDCallsEachOnce(t *testing.T) {
	for _, n := range []int{0, 1, forEachMin - 1, forEachMin, 3*forEachMin + 7} {
		pids := make([]*actor.PID, n)
		for i := range pids {
			pids[i] = &actor.PID{Id: string(rune(i))}
		}
		var mu sync.Mutex
		seen := map[*actor.PID]int{}
		forEachPID(pids, func(pid *actor.PID) { mu.Lock(); seen[pid]++; mu.Unlock() })
		if len(seen) != n {
			t.Errorf("%d pids: %d called", n, len(seen))
		}
		for _, c := range seen {
			if c != 1 {
				t.Fatalf("%d pids: one called %d times", n, c)
			}
		}
	}
}
