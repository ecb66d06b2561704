// Package backoff is the one exponential backoff of the module: a Policy
// (first delay, cap, kind of jitter) whose Delay gives the pause before a
// retry, the jitter kinds on their own for a delay computed otherwise, and
// Sleep, the pause itself, cut short when its context ends.
//
// The engine (package actors), package election and the PostgreSQL and SQL
// Server backends use the Policy; each keeps its own numbers. Packages
// election and partition, the etcd backend and the bench pause with Sleep.
package backoff
