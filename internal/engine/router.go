package engine

import (
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/internal/lease"
)

// router finds the lease actor of a key for every command, without a shared
// mailbox on the way: a caller looks the key up in a sharded map and sends to
// the actor itself, so commands on different keys never queue behind each
// other. It spawns a lease actor on the first command for a key, and the
// registry's sweep retires actors that stayed idle (see sweep).
//
// The hand-over when an idle actor retires is what makes this safe: a command
// is counted (entry.sent) under the shard lock before it is sent, an actor
// reports itself idle with the number of commands it has handled
// (entry.idleAt), and the sweep retires it, under the same lock, only when
// the two are equal. A command counted after that finds no entry and spawns a
// new actor; none is ever sent to an actor that has retired.
//
// A held lease sleeps the same way. Its actor, with nothing to do but be
// renewed (which the renewer does without it), leaves what it must remember
// in its entry (entry.sleeper) when it reports itself idle, and the sweep
// stops it but keeps the entry, with no actor. The next message for the key
// wakes it: the router spawns a new actor, which takes up the sleeper. Most of
// a held lease's memory was its actor; a sleeping lease keeps its holding,
// its renewal and its alarm, and no actor. Everything that may come for a
// sleeping lease therefore comes through the router: the commands, its
// deadline alarm's ticks and the renewer's answers (sendTo); the notices,
// which a lease held with nobody waiting ignores, do not wake it (routeLive).
//
// Nothing is ever sent while a shard lock is held: with the caller-runs
// dispatcher (dispatcher.go) a send may run the receiving actor right there.
type router struct {
	seed    maphash.Seed
	shards  [routerShards]routerShard
	closing atomic.Bool // set by Shutdown: no new entry after it (a sleeper still wakes)
	stopped atomic.Bool // set by Engine.Stop: no actor is spawned after it
	// groups finds the entries of a key's holdings under a limit above 1
	// (groups.go).
	groups groups

	// spawn starts the lease actor of e; called with e's shard locked.
	spawn func(e *entry) *actor.PID
}

// routerShards spreads the map's lock: enough that 64 goroutines on distinct
// keys rarely meet, few enough that a sweep visits them cheaply.
const routerShards = 64

type routerShard struct {
	mu sync.Mutex
	m  map[string]*entry
	// awake lists the entries that have had an actor since the last sweep
	// (each once, entry.listed), for the sweep to visit: it would cost a
	// core's fifth to walk a million sleeping leases twice a second.
	awake []*entry
	// props spawns the shard's lease actors; spawning is the entry being
	// spawned, for its producer (both the engine's: Engine.spawnLease).
	props    *actor.Props
	spawning *entry
	_        [8]byte // 64 bytes: neighbouring shards' locks on lines of their own
}

// entry is one key's lease actor as the router knows it.
type entry struct {
	key string
	// grouped: key is a holding's under a limit above 1, which serves the
	// store key before its NUL (groups.go).
	grouped bool
	listed  bool // in its shard's awake list (under the shard lock)
	pid     *actor.PID
	// sent counts the commands routed to the actor (changed under the shard
	// lock; groups.routes reads it without); mark is the sent count at the
	// sweep that first found it idle, plus one (0: not seen idle).
	sent atomic.Uint64
	mark uint64
	// idleAt is written by the actor when it has nothing to do: the number
	// of commands it had handled then. It equals sent only when it is idle
	// with every command routed to it handled.
	idleAt atomic.Uint64
	// holding is the actor's current holding, for Manager.Held and
	// Manager.HealthCheck to read without asking every actor.
	holding atomic.Pointer[lease.Holding]
	// sleeper is what a held lease's actor left to be taken up by the
	// next one (package actors' sleeper), set with idleAt; pid is nil
	// while the lease sleeps.
	sleeper any
}

// routeMode says which actor a message may go to.
type routeMode uint8

const (
	routeLive  routeMode = iota // an actor running now; a sleeping lease is not woken
	routeWake                   // a running actor, or a sleeping lease's, woken for it
	routeSpawn                  // any, spawned for the key if it has none
)

func newRouter(spawn func(*entry) *actor.PID) *router {
	r := &router{seed: maphash.MakeSeed(), spawn: spawn}
	for i := range r.shards {
		r.shards[i].m = map[string]*entry{}
	}
	return r
}

func (r *router) shard(key string) *routerShard {
	return &r.shards[maphash.String(r.seed, key)%routerShards]
}

// route counts a command for key's lease actor and returns the actor (see
// routeMode); nil when there is none it may go to (or when the Manager is
// closing and one would have to be spawned).
func (r *router) route(key string, mode routeMode) *actor.PID {
	s := r.shard(key)
	s.mu.Lock()
	e := s.m[key]
	if e == nil {
		if mode != routeSpawn || r.closing.Load() { // (Stop sets closing too)
			s.mu.Unlock()
			return nil
		}
		e = &entry{key: key}
		_, e.grouped = storeKey(key)
		e.pid = r.spawn(e)
		s.m[key] = e
		s.list(e)
		if e.grouped {
			r.groups.add(e)
		}
	}
	pid := r.countLocked(s, e, mode)
	s.mu.Unlock()
	return pid
}

// routeTo is route for the entry e itself: nil when e is no longer its key's
// (its holding ended and its actor retired since), or asleep and not to be
// woken.
func (r *router) routeTo(e *entry, mode routeMode) *actor.PID {
	s := r.shard(e.key)
	s.mu.Lock()
	var pid *actor.PID
	if s.m[e.key] == e {
		pid = r.countLocked(s, e, mode)
	}
	s.mu.Unlock()
	return pid
}

// countLocked wakes e's lease if it sleeps and mode allows, and counts a
// command for its actor, which it returns (nil: none counted). s is e's
// shard, locked.
func (r *router) countLocked(s *routerShard, e *entry, mode routeMode) *actor.PID {
	if e.pid == nil {
		if mode == routeLive || r.stopped.Load() {
			return nil
		}
		e.pid = r.spawn(e) // its actor takes up e.sleeper
		s.list(e)
	}
	e.sent.Add(1)
	return e.pid
}

// sweep retires the actors idle since the previous sweep with no command
// routed to them since, and returns them for the caller to stop (after the
// locks are released). The entry of an actor that left a sleeper stays,
// asleep.
func (r *router) sweep() []*actor.PID {
	var retired []*actor.PID
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		kept := s.awake[:0]
		for _, e := range s.awake {
			switch {
			case s.m[e.key] != e || e.pid == nil: // gone, or asleep
				e.listed = false
				continue
			case e.idleAt.Load() != e.sent.Load():
				e.mark = 0
			case e.mark == e.sent.Load()+1: // idle for a whole sweep period
				retired = append(retired, e.pid)
				e.mark, e.listed = 0, false
				if e.sleeper != nil {
					e.pid = nil
					continue
				}
				delete(s.m, e.key)
				if e.grouped {
					r.groups.remove(e)
				}
				continue
			default:
				e.mark = e.sent.Load() + 1
			}
			kept = append(kept, e)
		}
		clear(s.awake[len(kept):])
		s.awake = kept
		if cap(s.awake) > 2*len(s.awake)+64 {
			s.awake = slices.Clip(slices.Clone(s.awake)) // let a burst's array go
		}
		if len(s.m) == 0 {
			s.m = map[string]*entry{} // Go maps never shrink
		}
		s.mu.Unlock()
	}
	return retired
}

// list adds e, which has an actor now, to the awake list (s locked).
func (s *routerShard) list(e *entry) {
	if !e.listed {
		e.listed = true
		s.awake = append(s.awake, e)
	}
}

// drop forgets e if it is still key's entry and pid its actor (which stopped
// on its own). It reports false when pid's lease was put to sleep instead (or
// has woken in another actor since): its holding lives on in the entry.
func (r *router) drop(e *entry, pid *actor.PID) bool {
	s := r.shard(e.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[e.key] != e {
		return true
	}
	if e.pid != pid {
		return false
	}
	delete(s.m, e.key)
	if e.grouped {
		r.groups.remove(e)
	}
	return true
}

// all counts one command for every actor, waking the sleeping leases, and
// returns them (for Shutdown); with count false it returns the actors running
// now, to be stopped. The shards are visited from one goroutine per core:
// waking a million sleeping leases spawns a million actors.
func (r *router) all(count bool) []*actor.PID {
	n := runtime.GOMAXPROCS(0)
	parts := make([][]*actor.PID, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() {
			var out []*actor.PID
			for i := p; i < routerShards; i += n {
				s := &r.shards[i]
				s.mu.Lock()
				for _, e := range s.m {
					if !count {
						if e.pid != nil {
							out = append(out, e.pid)
						}
					} else if pid := r.countLocked(s, e, routeWake); pid != nil {
						out = append(out, pid)
					}
				}
				s.mu.Unlock()
			}
			parts[p] = out
		})
	}
	wg.Wait()
	return slices.Concat(parts...)
}

// holdings lists the current holdings, in no particular order.
func (r *router) holdings() []*lease.Holding {
	var out []*lease.Holding
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if h := e.holding.Load(); h != nil {
				out = append(out, h)
			}
		}
		s.mu.Unlock()
	}
	return out
}
