// Package fence is what a protected resource uses to refuse the writes of a
// stale lease holder: the highest fencing token recorded per resource, and a
// Store interface that every guard of leasehold answers.
//
// A lease ends at its TTL whether or not its holder noticed: a holder paused
// by a long GC, SIGSTOP or a VM migration wakes up still believing it holds
// the name, and writes over the work of the holder that came after it. Its
// grant's fencing token (leasehold.Lease.Token) is lower than its
// successor's, so a resource that records the highest token it has seen and
// refuses lower ones keeps the newest holder's work. Memory does that for
// one process; backend/postgres, backend/sqlserver, backend/mysql and
// backend/redis guard writes in their store, atomically with the write;
// fence/httpfence and fence/grpcfence carry the token over HTTP and gRPC.
// docs/fencing-tokens.md says which to use when.
package fence
