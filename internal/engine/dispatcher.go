package engine

import "github.com/asynkron/protoactor-go/actor"

// dispatcher runs every actor of a Manager on the goroutine that sends it a
// message while its mailbox is idle (protoactor's synchronized dispatcher):
// a caller's Acquire is handled on the caller's own goroutine, a backend
// result on the worker that got it, a tick on the timer's goroutine.
//
// Why: an actor is defined by its mailbox (one message at a time, in order),
// not by the goroutine that empties it, and handing every message to another
// goroutine cost more than everything else the engine does. Measured on the
// memory backend, each hand-off was a goroutine wake-up of a microsecond or
// more, four to eight of them per acquire+release cycle. With this dispatcher
// an uncontended cycle on the memory backend wakes no goroutine at all, and a
// cycle on a networked backend wakes only the goroutines that wait for I/O.
//
// What it asks of the engine: an actor never blocks in Receive (true of every
// actor here; backend calls run on the backend actor's workers), and nobody
// sends a message while holding a lock that the receiving actor may take (the
// router releases its shard lock before every send). A message sent to an
// actor whose mailbox is already being run is queued and handled by the
// goroutine running it, before it returns.
var dispatcher = actor.NewSynchronizedDispatcher(throughput)

// throughput is how many messages a mailbox run handles before it yields the
// processor (runtime.Gosched) and goes on.
const throughput = 300
