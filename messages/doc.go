// Package messages is what the engine of package actors takes: the commands
// (Acquire, CancelWait, Renew, StopRenewing, Release), sent with
// actors.Engine.Send from any goroutine, and Shutdown, with
// actors.Engine.Shutdown; with the replies, errors and state they carry. Package leasehold's Manager is one sender; a program that runs
// the engine inside its own protoactor-go actor system (actors.Start with its
// system's root context) and sends commands from its own actors is the
// other, and the reason this package is public. What the engine's actors say
// to each other is package internal/protocol.
//
// Commands reach a lease actor without passing through a shared mailbox: the
// engine's router looks the key up and sends to the actor itself.
//
// The files: commands.go (the commands), errors.go (the outcomes they
// report), state.go (the state they carry, shared outside the message flow:
// the Holding, the Ticket that settles a grant racing a caller who gives up,
// the subscriber's Sink and the Lost event).
//
// The package has no variables: its errors are constants of type Error,
// matched with errors.Is (package leasehold's sentinel errors are the same
// values), and every type the engine defines elsewhere is named here by an
// alias, so that it is one type wherever it is used.
//
// Commands from the public API carry a reply channel (buffered, size 1) rather
// than using protoactor futures: the caller selects on it and on its context,
// and no actor ever blocks on a reply.
//
// Every command implements actor.IgnoreDeadLetterLogging: one that reaches a
// stopped actor is expected, not news.
package messages
