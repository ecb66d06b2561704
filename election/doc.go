// Package election elects one leader among the processes that campaign for a
// lease name, on top of a leasehold.Manager: whichever Manager holds the
// lease leads, for as long as it holds it.
//
// Run campaigns, leads and campaigns again, calling Callbacks as leadership
// comes and goes (the shape of client-go's leaderelection); Leader says who
// leads now. Leadership is a lease: it ends the moment the lease is lost
// (fail closed, before any other process can be elected), and its fencing
// token, leasehold.LeaseFrom(ctx).Token() inside OnStartedLeading, fences off
// earlier leaders' writes.
package election
