package engine

import (
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// A held lease's entry sleeps: the sweep stops its actor but keeps the entry
// and what the actor left; a notice does not wake it, a command or a message
// for the entry itself does (the new actor takes up the sleeper), and so
// does Shutdown's count of every actor; once Stop has begun, nothing wakes.
func TestSleepingEntries(t *testing.T) {
	var took []any
	n := 0
	r := newRouter(func(e *entry) *actor.PID {
		n++
		took = append(took, e.TakeSleeper())
		return actor.NewPID("test", strconv.Itoa(n))
	})
	first := r.route("k", routeSpawn)
	e := r.shard("k").m["k"]
	e.Sleep(e.sent.Load(), "what the actor left")
	for i := range 2 {
		if got := r.sweep(); i == 1 && (len(got) != 1 || got[0] != first) {
			t.Fatalf("second sweep stopped %v, want %v", got, first)
		}
	}
	if r.shard("k").m["k"] != e || e.pid != nil {
		t.Fatal("the held lease's entry is gone, or still has its actor")
	}
	if got := r.sweep(); len(got) != 0 {
		t.Fatalf("a sweep stopped %v of a sleeping lease", got)
	}
	if n := len(r.shard("k").awake); n != 0 {
		t.Fatalf("the sweep still visits %d entries of a shard whose only lease sleeps", n)
	}
	if len(r.all(false)) != 0 {
		t.Fatal("Stop would stop a sleeping lease's actor")
	}
	if r.route("k", routeLive) != nil || e.sent.Load() != 1 {
		t.Fatal("a notice woke the sleeping lease")
	}
	if r.drop(e, first) {
		t.Fatal("the actor put to sleep may drop its entry")
	}
	second := r.routeTo(e, routeWake)
	if second == nil || second == first || took[1] != "what the actor left" || e.sent.Load() != 2 {
		t.Fatalf("woken: %v (was %v), took %v, sent %d", second, first, took, e.sent.Load())
	}
	if aw := r.shard("k").awake; len(aw) != 1 || aw[0] != e {
		t.Fatalf("a woken lease is not for the sweep to visit: %v", aw)
	}
	// Asleep again; Shutdown wakes it (its count), after Stop nothing does.
	e.Sleep(e.sent.Load(), "again")
	r.sweep()
	r.sweep()
	r.closing.Store(true)
	if pids := r.all(true); len(pids) != 1 || took[2] != "again" {
		t.Fatalf("Shutdown reached %v, took %v", pids, took)
	}
	e.Sleep(e.sent.Load(), "after stop")
	r.sweep()
	r.sweep()
	r.stopped.Store(true)
	if r.route("k", routeWake) != nil || r.routeTo(e, routeWake) != nil || len(r.all(true)) != 0 {
		t.Fatal("a sleeping lease woke after Stop")
	}
	// An entry no longer its key's takes nothing.
	r.stopped.Store(false)
	if !r.drop(e, e.pid) {
		t.Fatal("drop")
	}
	if r.routeTo(e, routeWake) != nil {
		t.Fatal("a message for an entry gone was routed")
	}
}
