package backend

import (
	"fmt"
	"time"
)

// # The waiter queue and the hand-off
//
// A store whose Info says Queue keeps, per key, a FIFO queue of the attempts
// that wait for it, and hands the key to the head of that queue in the same
// atomic step as the release that frees it: one release, one grant, one
// notice, instead of every waiter racing for the key. The design and its
// model check: actors/model/HANDOFF.md. The rules, each one atomic step on
// the store:
//
// Acquire with Wait and Queue.EntryTTL > 0, refused: the attempt is put at
// the tail of the key's queue (an attempt already queued keeps its place),
// and its entry lives Queue.EntryTTL from now (each such acquire renews it).
// A full queue (MaxQueueEntries live entries) enqueues nothing: the answer
// says Queued false and the attempt simply polls. Grant.Queued reports
// whether the attempt has an entry after the call.
//
// Acquire when the key is free: expired entries are dropped first. When the
// live head is another attempt, that head has the turn for its
// Queue.Pickup, counted from the first acquire that found the key free with
// that head (the store records the turn's start): until then every other
// attempt is refused (and queued if it waits), with Holder "" and
// HolderExpiresIn the time left of the turn. When the turn has passed, the
// head is removed (it let its turn go) and the key is granted to the caller
// as usual. The caller's own entry, if any, is removed when it is granted.
//
// Release matching the live holding: the holding is deleted and, in the same
// step, the head live entry (expired entries dropped) is removed from the
// queue and granted the key: a new holding of that entry's owner and
// attempt, with its metadata, a new higher token, expiring after the entry's
// Queue.Pickup (not a TTL: the new holder picks it up, with Renew or with an
// Acquire of the same attempt, which gives it the full TTL), counted from
// the time of this step: no earlier than any step the store made on the key
// before it (the engine bounds the hand-off's end by the send of the poll
// HandOff.Poll names, so a store reads its clock within the step). A HandOff
// naming it is sent to the entry's Queue.Notify address (when not "" and the
// store can notify). With no live entry, the key is free.
//
// Release matching no live holding: the entry of (Owner, Attempt), if any,
// is removed: a waiter leaving the queue (cancel, wait timeout, Close) sends
// Release with its attempt and Token 0. Nil either way, as before.
//
// Revoke hands on as a release does. Expiry hands on nothing by itself: the
// key is free, and the head's turn above applies. A restart that loses the
// data loses the queue with the holdings.
//
// A Queue-less store (Info().Queue false) ignores AcquireRequest.Queue:
// waiters poll, as they always did.

// MaxQueueEntries bounds a key's queue: a full queue enqueues nothing.
const MaxQueueEntries = 256

// MaxAddressBytes is the longest HandOff address: printable ASCII without
// spaces, like an attempt.
const MaxAddressBytes = 64

// QueueRequest asks a Queue store to keep a refused waiting attempt in the
// key's queue. The zero value queues nothing.
type QueueRequest struct {
	// EntryTTL is how long the entry lives after this request, unless
	// another acquire of the same attempt renews it. 0: do not queue.
	EntryTTL time.Duration
	// Pickup is the TTL of a hand-off to this attempt: how long the key is
	// kept for it before it is taken back. Also the length of the head's
	// turn after the key became free by expiry.
	Pickup time.Duration
	// Notify is the address a HandOff to this attempt is sent to (see
	// Backend.WatchHandOffs); "" sends none.
	Notify string
	// Poll numbers this request among the acquires of its attempt (the
	// engine counts them). The store keeps the number of the latest it has
	// processed with the entry and returns it in the HandOff, so that the
	// engine can bound when the hand-off was made: after that acquire was
	// sent.
	Poll uint64
}

// validate checks q against the limits (the zero QueueRequest is valid).
func (q QueueRequest) validate(wait bool) error {
	if q == (QueueRequest{}) {
		return nil
	}
	if !wait {
		return fmt.Errorf("%w: a queue entry for an acquire that will not wait", ErrInvalidRequest)
	}
	if q.EntryTTL < MinTTL || q.EntryTTL > MaxTTL {
		return fmt.Errorf("%w: queue entry TTL %v is outside [%v, %v]", ErrInvalidRequest, q.EntryTTL, MinTTL, MaxTTL)
	}
	if q.Pickup < MinTTL || q.Pickup > MaxTTL {
		return fmt.Errorf("%w: pickup window %v is outside [%v, %v]", ErrInvalidRequest, q.Pickup, MinTTL, MaxTTL)
	}
	if q.Notify != "" {
		if len(q.Notify) > MaxAddressBytes {
			return fmt.Errorf("%w: notify address is %d bytes, more than %d", ErrInvalidRequest, len(q.Notify), MaxAddressBytes)
		}
		for i := 0; i < len(q.Notify); i++ {
			if c := q.Notify[i]; c <= ' ' || c > '~' {
				return fmt.Errorf("%w: notify address %q is not printable ASCII without spaces", ErrInvalidRequest, q.Notify)
			}
		}
	}
	return nil
}

// HandOff tells a waiting attempt's Manager that a release handed it the key.
// A Queue store whose Info says HandOffNotices sends it to the address the
// waiting attempt named (Redis pub/sub, PostgreSQL LISTEN/NOTIFY, the memory
// store's callbacks). Notices are at most once: a lost one costs the waiter
// its poll period, never safety (a hand-off not picked up within its Pickup
// window is taken back).
type HandOff struct {
	Key     string
	Owner   string
	Attempt string
	// Token is the new holding's token.
	Token uint64
	// Poll is QueueRequest.Poll of the attempt's latest acquire the store
	// had processed when it handed the key on.
	Poll uint64
}
