package actors

// leaseState is where one key's lease actor stands. Beside it the actor keeps
// its FIFO queue of local waiters (lease_waiters.go), the one-attempt
// Acquires that wait to learn who holds the key (observers), and the releases
// the store has not confirmed (unconfirmed.go).
//
//	   ┌────────── refused, will wait ──────────┐
//	   ▼                                        │
//	polling ──retry tick / release notice──▶ acquiring ◀── idle (a waiter is queued)
//	   │                                        │ │
//	   └── hand-off notice (lease_handoff.go) ──┼─┼──▶ held, for the pickup window
//	                                            │ │
//	                granted and claimed ◀───────┘ └──▶ failed, abandoned, fenced, late
//	                        │                               │
//	                        ▼                               ▼
//	 renewing ◀──due──▶   held ──Release, loss, Close──▶ releasing ──answered──▶ idle
//
// At most one call that changes ownership (an acquire or a release) is in
// flight per key, so a release always completes before the next acquire, and
// a grant is never made while an older holding of this Manager might still
// stand. Shutdown is not a state but a mode (closing): no new work starts, the
// call in flight finishes, the holding is released, and the actor ends in
// closed.
type leaseState uint8

const (
	// idle: nothing held here, no ownership call in flight. Waiters, if any,
	// are about to start an acquire.
	idle leaseState = iota
	// acquiring: the head waiter's acquire is in flight.
	acquiring
	// polling: the head waiter was refused and waits for its retry tick, a
	// release notice, or (queued on the store) a hand-off notice.
	polling
	// held: this Manager holds the key (cur is set).
	held
	// renewing: held, with a renewal in flight.
	renewing
	// releasing: a release is in flight (the caller's, a loss's cleanup, an
	// abandoned grant's, or the retry of an unconfirmed one).
	releasing
	// closed: Shutdown has been handled and reported done. Every command is
	// answered at once (ErrClosed, ErrStale, nil).
	closed
)

func (s leaseState) String() string {
	return [...]string{"idle", "acquiring", "polling", "held", "renewing", "releasing", "closed"}[s]
}

// holds reports whether the state has a current holding.
func (s leaseState) holds() bool { return s == held || s == renewing }
