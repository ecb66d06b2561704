// Package actors runs the engine behind a leasehold Manager: Start spawns its
// actors in a protoactor-go actor system from a Config, and the Engine it
// returns takes the commands of package messages, routed by key.
//
// A lease actor per key in use owns that key's state machine (the leaseState
// type: idle, acquiring, polling, held, renewing, releasing, closed) and its
// FIFO queue of local waiters, driven by commands, backend results and its own
// timer ticks; it never blocks. Its code is split by concern: lease_actor.go
// (the loop), lease_state.go, lease_waiters.go, lease_handoff.go (waiters
// queued on the store), lease_holding.go (holding and renewal),
// lease_release.go and unconfirmed.go (releases), lease_shutdown.go (Close),
// sleeper.go (a held lease with nothing to do sleeps without an actor, and a
// new one takes it up when a message comes for it). start.go is the
// package's public surface (Config, Start, Engine).
//
// The rest of the engine, which a user has no business reaching, is package
// internal/engine: the router and the registry (finding, spawning, retiring
// and putting to sleep lease actors), the backend actor and its coalescer,
// the renewer, the alarm heaps, the event hub, the dispatcher and the timing policy. What
// the lease actor uses of it is gathered in its file seam.go.
//
// This package keeps no state of its own at package level, and Config is
// settings only (surface_test.go holds it to that).
package actors
