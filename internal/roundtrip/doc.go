// Package roundtrip makes a backend's calls end with their context when the
// store's client library does not.
//
// Some clients ignore the cancellation of a call's context while they wait on
// the network: go-redis lets only a deadline reach the socket, and
// go-mssqldb's login reads without one and waits after a cancelled query for
// the server to confirm it. A link that silently stops answering would then
// hold the call past its context. A Runner runs each call's round trips on
// one of its I/O goroutines while the caller waits for them or for its
// context, whichever ends first; an abandoned round trip finishes in the
// background, within the client's own bounds.
//
// A request abandoned so may still reach the store. A later call on one of
// its names first waits for it to finish (within the later call's context),
// so that the store runs the two in the order they were made: a clean-up
// release after an abandoned acquire must not overtake it, or the acquire
// would grant a name nobody holds.
package roundtrip
