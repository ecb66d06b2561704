// Package actors holds the actors behind a leasehold Manager:
//
//   - the registry routes commands by key to one lease actor per key, spawning
//     it on demand and stopping it once it is idle (nothing held, nobody
//     waiting), so memory follows live leases rather than every name ever used;
//   - the lease actor owns one key's state machine (idle → acquiring → held ⇄
//     renewing → released | lost) and its FIFO queue of local waiters, driven
//     by commands, backend results and its own timer ticks; it never blocks;
//   - the backend actor owns the Backend and runs its calls off the mailbox;
//   - the event hub fans loss events out to subscribers without blocking.
//
// The messages they exchange are all in package messages. Timers are
// scheduler.SendOnce re-armed with a generation number (never SetReceiveTimeout
// or SendRepeatedly, which race in protoactor-go), and every timer is cancelled
// when its actor stops.
package actors
