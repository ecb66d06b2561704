// Package redistest starts real redis-server processes and a controllable
// TCP proxy (internal/faultproxy, the root module's own) for the Redis backend's
// tests: restarts, replicas, cut connections and slow links, all on loopback,
// without mocking Redis.
package redistest
