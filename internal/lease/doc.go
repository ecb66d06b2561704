// Package lease is the engine's state that the actors share with the public
// API of package leasehold, outside the message flow: the Holding a lease
// actor writes and the Lease handle reads (holding.go), the Ticket that
// settles a grant racing a caller who gives up (ticket.go), and the Sink
// through which the event hub hands a Lost event to a Subscription
// (events.go), with the errors a Holding ends with by itself (errors.go).
//
// The messages of package messages carry these values; this package imports
// nothing of the engine, so messages, actors and leasehold can all use it.
package lease
