package backoff

import (
	"math/rand/v2"
	"time"
)

// Jitter is how a Policy randomises a delay d.
//
// Two kinds are in use on purpose. FullJitter spreads the retries of many
// clients the most and is right where any pause will do (the PostgreSQL
// backend retrying a transaction). HalfJitter keeps at least half of the
// pause, so that a backoff still backs off: the engine's polling waiters,
// release retries and the election's campaigns must not hit a failing or
// busy store again almost at once, and the SQL Server backend waits out
// a deadlock's other session.
type Jitter int

const (
	// NoJitter: exactly d.
	NoJitter Jitter = iota
	// FullJitter: uniform in [1ns, d] (never 0, so a retry always yields).
	FullJitter
	// HalfJitter: uniform in [d/2, d), so that contenders do not retry in
	// lockstep but still wait.
	HalfJitter
)

// Apply returns d randomised by j. A d too small to randomise (below 1 ns
// for FullJitter, 2 ns for HalfJitter) is returned as it is.
func (j Jitter) Apply(d time.Duration) time.Duration {
	switch {
	case j == FullJitter && d >= 1:
		return rand.N(d) + 1
	case j == HalfJitter && d >= 2:
		return d/2 + rand.N(d/2)
	}
	return d
}

// Policy is capped exponential backoff: the n-th delay (n from 0) is
// Base·2^n, at most Cap, randomised by Jitter. Base and Cap are expected
// positive with Base <= Cap; callers validate their options.
type Policy struct {
	Base   time.Duration // the delay before jitter for n = 0
	Cap    time.Duration // no delay before jitter exceeds it
	Jitter Jitter
}

// Ceiling is min(Cap, Base·2^n), without overflow for any n (a negative n
// counts as 0): the bound the jittered Delay stays within.
func (p Policy) Ceiling(n int) time.Duration {
	n = max(n, 0)
	// Base<<n <= Cap exactly when Base <= Cap>>n; n >= 63 would shift a
	// positive Cap to 0.
	if n < 63 && p.Base <= p.Cap>>n {
		return p.Base << n
	}
	return p.Cap
}

// Delay is the pause before retry n (n from 0): Ceiling(n) jittered.
func (p Policy) Delay(n int) time.Duration { return p.Jitter.Apply(p.Ceiling(n)) }
