package actors

// leaseState is where one key's lease actor stands, and so what it accepts
// (one handler per state, lease_actor.go). Beside it the actor keeps data:
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
// Shutdown, in any of those states, moves to the closing state that says what
// is still in flight; from then on no new work starts, every waiter is
// answered ErrClosed, and the holding, if any, ends as released:
//
//	                          Shutdown
//	idle, polling ────────────────────────────────▶ closing ──nothing to send──▶ closed
//	acquiring ──────▶ closingAcquiring ──answered──▶  │  ▲
//	held, renewing,                                   │  │
//	releasing ──────▶ closingReleasing ◀──a release───┘  │
//	                         └───────answered────────────┘
//
// (A release in flight that was the retry of an unconfirmed one is not waited
// for: releasing goes to closing then.) From closing, the actor sends the
// releases still owed (a grant the answered acquire got, a leaving waiter's
// clean-up) one at a time, and ends in closed.
//
// At most one call that changes ownership (an acquire or a release) is in
// flight per key, so a release always completes before the next acquire, and
// a grant is never made while an older holding of this Manager might still
// stand.
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

	// The states after Shutdown (shutDown reports them).

	// closing: Shutdown has been handled and nothing is in flight. The
	// actor only passes through it while it handles a message: settle then
	// sends a release still owed (closingReleasing) or ends in closed.
	closing
	// closingAcquiring: the head waiter's acquire was in flight when
	// Shutdown came. Its answer is awaited; whatever it granted is given
	// back, and its caller is answered ErrClosed once that is done.
	closingAcquiring
	// closingReleasing: a release is in flight after Shutdown (the
	// holding's, a grant's given back, a leaving waiter's clean-up).
	closingReleasing
	// closed: Shutdown has been handled and reported done. Every command is
	// answered at once (ErrClosed, ErrStale, nil).
	closed
)

func (s leaseState) String() string {
	return [...]string{"idle", "acquiring", "polling", "held", "renewing", "releasing",
		"closing", "closingAcquiring", "closingReleasing", "closed"}[s]
}

// holds reports whether the state has a current holding.
func (s leaseState) holds() bool { return s == held || s == renewing }

// acquireSent reports whether the head waiter's acquire is in flight.
func (s leaseState) acquireSent() bool { return s == acquiring || s == closingAcquiring }

// shutDown reports whether Shutdown has been handled: the closing states and
// closed.
func (s leaseState) shutDown() bool { return s >= closing }
