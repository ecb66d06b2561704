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
	set := g.m[e.store]
	if set == nil {
		set = map[*entry]struct{}{}
		g.m[e.store] = set
	}
	set[e] = struct{}{}
	g.mu.Unlock()
	g.n.Add(1)
}

// remove forgets e (called with e's router shard locked).
func (g *groups) remove(e *entry) {
	g.mu.Lock()
	if set := g.m[e.store]; set != nil {
		if _, ok := set[e]; ok {
			delete(set, e)
			g.n.Add(-1)
		}
		if len(set) == 0 {
			delete(g.m, e.store)
		}
	}
	g.mu.Unlock()
}

// routes lists the route keys of key's grouped entries. The caller routes
// to each afterwards (never under g.mu: routing takes shard locks, which are
// taken before g.mu).
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
	out := make([]string, 0, len(set))
	for e := range set {
		out = append(out, e.key)
	}
	return out
}
