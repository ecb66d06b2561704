package engine

import (
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold/internal/backoff"
)

// safetyMargin is subtracted from a TTL for the local deadline, so the holder
// gives up before the backend's clock can let anyone else in: a tenth of the
// TTL (clock rate drift and scheduling delay grow with it), at most a second.
func safetyMargin(ttl time.Duration) time.Duration {
	return min(ttl/10, time.Second)
}

// LocalDeadline is when a holding must count as lost without a confirmed
// renewal: the moment the request was sent, plus TTL, minus the margin.
func LocalDeadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - safetyMargin(ttl))
}

// MaxRenewEvery is the longest renewal period a lease of ttl can keep: its
// local deadline is ttl minus the safety margin, and a renewal needs as much
// again to be sent and confirmed before it (the margin HealthCheck allows a
// renewal to be late by).
func MaxRenewEvery(ttl time.Duration) time.Duration { return ttl - 2*safetyMargin(ttl) }

// RenewDelay is the time to the next auto-renewal after a renewal of ttl:
// renewEvery, scaled when an explicit Renew chose another TTL, and never
// more than such a TTL can keep (the margin is not a fixed share of the TTL,
// so a period that fits the acquire's TTL may not fit a shorter one).
func RenewDelay(renewEvery, acquireTTL, ttl time.Duration) time.Duration {
	if ttl == acquireTTL {
		return renewEvery
	}
	return min(time.Duration(float64(renewEvery)*float64(ttl)/float64(acquireTTL)), MaxRenewEvery(ttl))
}

// Spread shortens a renewal period by up to a tenth at random, so that leases
// acquired together do not all renew in the same millisecond.
func Spread(d time.Duration) time.Duration {
	if d < 10 {
		return d
	}
	return d - rand.N(d/10)
}

// RenewRetryDelay is the pause before retrying an unconfirmed renewal: a
// quarter of the time left, at most a second, so several tries fit before the
// deadline.
func RenewRetryDelay(left time.Duration) time.Duration {
	return backoff.HalfJitter.Apply(max(min(left/4, time.Second), time.Millisecond))
}

// Poll backoff for a waiter whose key is held elsewhere.
const (
	pollFirst = 2 * time.Millisecond
	// With release notifications, polling is only a safety net for a lost
	// notification; without them it is the only way to learn of a release.
	pollCapNotified = 2 * time.Second
	pollCapPolling  = 250 * time.Millisecond
)

// pollBackoff is the polling without release notifications: from pollFirst
// doubling to pollCapPolling, half jitter so that contenders do not retry in
// lockstep.
var pollBackoff = backoff.Policy{Base: pollFirst, Cap: pollCapPolling, Jitter: backoff.HalfJitter}

// PollDelay is the pause before the next attempt after `attempt` refusals,
// and never later than just after the holder's expiry (expiry sends no
// notification). Without release notifications it backs off exponentially
// from a few milliseconds, with jitter. With them, a release wakes the waiter
// at once (also one that happens while an attempt is in flight), so polling
// is only the safety net for a lost notification: every process's waiter
// polling a hot name would multiply the store's load for nothing.
//
// pickup, when not 0, is the pickup window of a waiter queued on the store
// (lease_handoff.go): a hand-off to it lasts that long, so it polls within
// it; while hand-off notices are watched (handOffs), a poll only keeps its
// entry alive and picks up a hand-off whose notice was lost, and comes no
// more often than that.
//
// holderLeft is the holder's remaining time as the store measured it (0:
// unknown). It is a duration, never a store timestamp compared with the local
// clock: a store whose clock disagrees with this host's must not make waiters
// poll every millisecond (or sleep for the skew).
func PollDelay(attempt int, notified bool, pickup time.Duration, handOffs bool, holderLeft time.Duration) time.Duration {
	d := pollBackoff.Delay(attempt)
	if notified {
		d = backoff.HalfJitter.Apply(pollCapNotified)
	}
	if pickup > 0 {
		q := backoff.HalfJitter.Apply(pickup)
		if handOffs {
			d = q
		} else {
			d = min(d, q)
		}
	}
	if holderLeft > 0 {
		d = min(d, holderLeft+time.Millisecond)
	}
	return max(d, time.Millisecond)
}

// releaseBackoff spaces out the resends of an unconfirmed release: 50 ms
// doubling to 5 s, with half jitter.
var releaseBackoff = backoff.Policy{Base: 50 * time.Millisecond, Cap: 5 * time.Second, Jitter: backoff.HalfJitter}

// ReleaseRetryDelay is the pause before sending an unconfirmed release again
// after tries sends: in [d/2, d) for d = min(50ms·2^tries, 5s).
func ReleaseRetryDelay(tries int) time.Duration { return releaseBackoff.Delay(tries) }

// HealthSlack is how late a renewal may be confirmed before Manager.HealthCheck
// reports it: the renew period plus this (the batching wait, the Spread and a
// round trip fit in it).
func HealthSlack(ttl time.Duration) time.Duration { return safetyMargin(ttl) }
