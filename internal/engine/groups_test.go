package engine

import (
	"slices"
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// fanOut routes a notice of key as Engine.notice and Engine.handOff do to
// the actors of key's holdings, and returns the route keys it went to.
func fanOut(r *router, key string) []string {
	var got []string
	for _, route := range r.groups.routes(key) {
		if r.route(route, routeLive) != nil {
			got = append(got, route)
		}
	}
	slices.Sort(got)
	return got
}

// TestNoticesSkipIdleHoldingActorsWhichTheSweepThenRetires: a key under a
// limit above 1 gets an actor per Acquire. Those whose holding ended (idle,
// every command handled) are not sent a notice of the key, which they would
// ignore; so a busy key's notices reach only its holders and waiters, and
// the sweep retires the idle actors however many notices come.
func TestNoticesSkipIdleHoldingActorsWhichTheSweepThenRetires(t *testing.T) {
	n := 0
	r := newRouter(func(*entry) *actor.PID { n++; return actor.NewPID("test", strconv.Itoa(n)) })
	const done = 100 // holdings that ended
	for i := range done + 1 {
		r.route(RouteKey("job", strconv.Itoa(i)), routeSpawn) // its Acquire
	}
	for i := range done { // its Release, both handled: idle
		key := RouteKey("job", strconv.Itoa(i))
		r.route(key, routeWake)
		r.shard(key).m[key].SetIdle(2)
	}
	waiter := RouteKey("job", strconv.Itoa(done)) // still waits: never idle
	for range 3 {
		if got := fanOut(r, "job"); !slices.Equal(got, []string{waiter}) {
			t.Fatalf("a notice of job went to %d actors (%q…), want only the waiter's %q", len(got), got[:min(len(got), 3)], waiter)
		}
		// A notice between sweeps, as on a busy key.
		if retired := r.sweep(); len(retired) != 0 && len(retired) != done {
			t.Fatalf("a sweep retired %d actors, want 0 or %d", len(retired), done)
		}
	}
	if left := len(r.groups.m["job"]); left != 1 {
		t.Fatalf("after three sweeps job has %d grouped actors, want 1 (the waiter's)", left)
	}
	if got := fanOut(r, "other"); len(got) != 0 {
		t.Fatalf("a notice of another key went to %q", got)
	}
}
