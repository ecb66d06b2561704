package engine

import (
	"strings"
	"sync"
	"sync/atomic"
)

// Leases with several holders (Acquire with a limit above 1) have one lease
// actor per holding, each under a route key of its own: the store key, a
// NUL, and an identity the Manager makes (RouteKey). Keys cannot hold a NUL
// (backend.CheckText), so no such route key is ever an exclusive lease's.
// A release or hand-off notice names the store key: groups finds the actors
// of that key's holdings, so that each gets it (an actor ignores a notice
// that is not for its own attempt, as any stale notice).
//
// Each Acquire has an actor of its own, which stays until the sweep retires
// it, so a busy key has many actors whose holding has ended. A notice skips
// those that are idle (nothing held, nobody waiting, every command routed to
// them handled): they would ignore it, and routing it would count a command,
// which keeps the sweep from ever retiring them while the key is busy, so
// that every notice would go to every holding the key had since.

// RouteKey is the route key of one holding of key under a limit above 1;
// id must be unique among the Manager's holdings of key.
func RouteKey(key, id string) string { return key + "\x00" + id }

// storeKey is the store key a route key routes to: the route key itself for
// an exclusive lease.
func storeKey(route string) (key string, grouped bool) {
	if i := strings.IndexByte(route, 0); i >= 0 {
		return route[:i], true
	}
	return route, false
}

// storeKey is the store key e's actor serves (see storeKey): worked out
// when needed rather than kept, as an entry stays for every lease held.
func (e *entry) storeKey() string {
	k, _ := storeKey(e.key)
	return k
}

// groups indexes the entries of route keys with a NUL by their store key.
type groups struct {
	mu sync.Mutex
	m  map[string]map[*entry]struct{}
	// n counts the indexed entries: a notice on a Manager that never used a
	// limit above 1 costs one atomic load.
	n atomic.Int64
}

// add indexes e (called with e's router shard locked).
func (g *groups) add(e *entry) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]map[*entry]struct{}{}
	}
	key := e.storeKey()
	set := g.m[key]
	if set == nil {
		set = map[*entry]struct{}{}
		g.m[key] = set
	}
	set[e] = struct{}{}
	g.mu.Unlock()
	g.n.Add(1)
}

// remove forgets e (called with e's router shard locked).
func (g *groups) remove(e *entry) {
	g.mu.Lock()
	key := e.storeKey()
	if set := g.m[key]; set != nil {
		if _, ok := set[e]; ok {
			delete(set, e)
			g.n.Add(-1)
		}
		if len(set) == 0 {
			delete(g.m, key)
		}
	}
	g.mu.Unlock()
}

// routes lists the route keys of key's grouped entries that are not idle.
// The caller routes to each afterwards (never under g.mu: routing takes
// shard locks, which are taken before g.mu).
//
// An entry skipped was idle when its sent count was read (idleAt, read
// first, never decreases and never passes sent): a command routed to it
// later is handled after the notice's change in the store, so the actor
// learns of that change by its own call.
func (g *groups) routes(key string) []string {
	if g.n.Load() == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	set := g.m[key]
	if len(set) == 0 {
		return nil
	}
	var out []string
	for e := range set {
		if e.idleAt.Load() == e.sent.Load() {
			continue
		}
		out = append(out, e.key)
	}
	return out
}
