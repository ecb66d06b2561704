// Package lease is the engine's state that the actors share with the public
// API of package leasehold, outside the message flow: the Holding a lease
// actor writes and the Lease handle reads (holding.go), the Ticket that
// settles a grant racing a caller who gives up (ticket.go), and the Sink
// through which the event hub hands a Lost event to a Subscription
// (events.go), and the one definition of what they all report: the engine's
// errors (errors.go, constants of type Error), the reasons of a loss and
// WaitForever (events.go).
//
// The messages of package messages carry these values; this package imports
// nothing of the engine, so messages, actors and leasehold can all use it.
// Package leasehold and package messages re-export what their users need
// (aliases and constants of the same values), so that an error or a reason is
// the same value wherever it is matched.
package lease
