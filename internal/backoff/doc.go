// Package backoff is the one exponential backoff of the module: a Policy
// (first delay, cap, kind of jitter) whose Delay gives the pause before a
// retry, and the jitter kinds on their own for a delay computed otherwise.
//
// The engine (package actors), package election and the PostgreSQL and SQL
// Server backends use it; each keeps its own numbers. The etcd backend is a
// module of its own and has no backoff of this kind.
package backoff
