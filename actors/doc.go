// Package actors holds the actors behind a leasehold Manager:
//
//   - a lease actor per key in use owns that key's state machine (the
//     leaseState type: idle, acquiring, polling, held, renewing, releasing,
//     closed) and its FIFO queue of local waiters, driven by commands, backend
//     results and its own timer ticks; it never blocks. Its code is split by
//     concern: lease_actor.go (the loop), lease_state.go, lease_waiters.go,
//     lease_holding.go (holding and renewal), lease_release.go and
//     unconfirmed.go (releases), lease_shutdown.go (Close);
//   - the router (router.go) finds a key's lease actor for every command
//     without a shared mailbox, spawns it on demand, and hands over safely
//     when an idle actor retires;
//   - the registry (registry.go) retires idle lease actors, so memory follows
//     live leases rather than every name ever used, and runs Close;
//   - the backend actor (backend_actor.go) owns the Backend and runs its calls
//     off the mailbox, coalescing the calls that are ready together into one
//     round trip (coalesce.go), and makes the renewer's batches;
//   - the renewer (renewer.go) owns the due times of the holdings'
//     renewals: its heap and timer send what is due as one batch, and a
//     lease actor hears only the answer;
//   - the event hub (hub.go) fans loss events out to subscribers without
//     blocking.
//
// Every actor runs on the goroutine that sends it a message while it is idle
// (dispatcher.go): an uncontended acquire on the memory backend wakes no
// goroutine at all. The messages they exchange are all in package messages.
// Holdings' local deadlines share a few heap-ordered timers (alarms.go), one
// per core or so, and their renewals the renewer's timer; the
// other timers are scheduler.SendOnce re-armed with a generation number
// (never SetReceiveTimeout or SendRepeatedly, which race in protoactor-go),
// and every timer is cancelled when its actor stops.
package actors
