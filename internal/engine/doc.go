// Package engine is the machinery behind the lease actors of package actors:
//
//   - the router (router.go) finds a key's lease actor for every command
//     without a shared mailbox, spawns it on demand, hands over safely
//     when an idle actor retires, and keeps a held lease asleep (no actor)
//     until a message comes for it;
//   - the registry (registry.go) retires idle lease actors and puts held
//     ones with nothing to do to sleep, so memory follows live leases
//     rather than every name ever used, and runs Close; Start and Engine,
//     which tie the actors of one Manager together, are in engine.go;
//   - the backend actor (backend_actor.go) owns the Backend and runs its calls
//     off the mailbox, coalescing the calls that are ready together into one
//     round trip (coalesce.go), and makes the renewer's batches
//     (backend_renew.go);
//   - the renewer (renewer.go) owns the holdings' automatic renewals: its
//     timing wheel and timer send what is due in batches, and it writes
//     each confirmation to its holding itself; a lease actor hears only
//     of what changes its state (a refusal, a failure, a late answer);
//   - the event hub (hub.go) fans loss events out to subscribers without
//     blocking;
//   - the timing policy (timing.go): local deadlines, renewal periods, poll
//     and retry delays; and the shared configuration and metrics (config.go,
//     metrics.go).
//
// Every actor runs on the goroutine that sends it a message while it is idle
// (dispatcher.go): an uncontended acquire on the memory backend wakes no
// goroutine at all. The messages they exchange are all in package messages.
// Holdings' local deadlines share a few heap-ordered timers (alarms.go), one
// per core or so, each alarm following its holding's deadline as the renewer
// moves it on, and their renewals the renewer's timer; the other timers
// are scheduler.SendOnce re-armed with a generation number (timer.go; never
// SetReceiveTimeout or SendRepeatedly, which race in protoactor-go), and
// every timer is cancelled when its actor stops.
//
// The lease actor lives in package actors and is handed to Start; what it
// uses of this package is gathered in seam.go.
package engine
