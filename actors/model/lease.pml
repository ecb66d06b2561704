/*
 * lease.pml: one name's lease protocol, as decided by the lease actor
 * (actors/lease_actor.go, actors/unconfirmed.go, actors/timing.go) against a
 * store that keeps the backend contract (backend/backend.go; the Redis scripts
 * backend/redis/scripts/*.lua are one implementation), optionally with the
 * waiter queue of the hand-off design (HANDOFF.md). Checked by
 * model_test.go, which reads the properties and variants from here.
 *
 * Up to three Managers (M0 and M1 configured with the same owner, M2 with
 * another) contend for one name. A store with server-side expiry, a fencing
 * counter, the restart grace and (HANDOFF) the waiter queue answers them over
 * a network that delays, reorders and loses requests and replies (a reply can
 * be lost after the store applied the request), and reports an error while a
 * request is still on its way (it may be applied later). A Manager can be
 * paused for any time: it simply takes no step while the clock runs.
 *
 * Time is discrete. Every timer is kept as the ticks left or passed (and the
 * time part of tokens relative to the last restart), so the state space stays
 * finite while the clock runs for ever: the checks cover any number of ticks
 * (TMAX can bound them, for experiments). The store's clock may gain up to
 * DRIFT ticks on the Managers' (clock drift within the margin).
 *
 * Names shared with the Go code (same decision, same name): startNext,
 * onAcquireResult (its error branch: onCallFailed), hold, releaseThenReply,
 * startRenew, onRenewResult, onHoldTick, lose, onRelease, startRelease,
 * onReleaseResult, settleRelease (in onCallFailed), retryUnconfirmed,
 * onShutdown, onWaitTimeout (a waiter gives up), localDeadline, safetyMargin
 * (MARGIN); polling's RetryTick and wake are pollAgain. The store's
 * Backend.Acquire/Renew/Release (acquire.lua, renew.lua, release.lua) are
 * storeAcquire/storeRenew/storeRelease; newToken is acquire.lua's token. The
 * hand-off design's names (enqueue, handOff, pickup window, the head's turn,
 * leaveWaiting = the clean-up release that leaves the queue) are those of
 * HANDOFF.md; the engine's side of it (actors/lease_handoff.go,
 * lease_waiters.go) is queueRequest (the poll numbers), onHandOff (a notice
 * comes), takeHandOff (the name held from the notice), the pickup renewal
 * (startRenew of a holding with pickup set) and acq.noticed (noticed); the
 * store's (backend/queue.go, backend/memory/queue.go) enqueueLocked
 * (enqueue, which records the poll number), turnLocked (the head's turn,
 * from the first acquire that finds the name free with that head) and
 * handOnLocked (handOff, whose notice carries the entry's poll number).
 *
 * The properties (each assertion names its own; model_test.go runs them):
 * (a) a_twoHolders: no two Managers hold the name with their local deadlines
 *     not passed;
 * (b) b_staleHolder: a Manager that holds has the newest token ever granted,
 *     so a resource that refuses tokens lower than the highest it has seen
 *     accepts no write from a holding that is not the newest;
 * (c) c_tokensIncrease: every new grant's token is above every earlier one,
 *     restarts included;
 * (d) d_unownedLonger: a live grant that no Manager holds or is acquiring
 *     (its Manager believes it does not hold it) ends within the TTL of the
 *     last request that made or extended it (a hand-off: of the release);
 * (e) with weak fairness (the liveness verifier, LIVE), once the holder's
 *     release is applied the waiting Manager eventually holds the name (the
 *     LTL formula e below); and e_deadContenderDelays: the store never
 *     refuses a live contender because of a dead contender's turn (an
 *     unclaimed hand-off, or the head's turn after an expiry) that began a
 *     pickup window or more ago.
 * The liveness runs assume timeliness besides fairness: within a tick every
 * message is delivered and every answer, notice, due poll and passed deadline
 * handled, unless a fault (a pause) lets the tick pass first.

 * The configuration is read when pan starts, from the environment (LH_*, see
 * readConfig), so that one compiled verifier checks every configuration and
 * every broken variant: the variables holding it are hidden (not part of the
 * state) and never change after the first step.
 *
 * What the abstraction leaves out: one name only (no cross-name effects, no
 * renewal batching); local waiter queues (one waiter per Manager at a time;
 * a one-attempt Acquire is a waiter that gives up after its first refusal,
 * and so may enqueue and leave again); at most one request of a Manager's
 * besides the one it awaits can still be in the network (NSLOT); the exact
 * poll and retry delays (any timing is allowed instead; the liveness runs
 * require a live Manager to poll once per tick and to react within the tick
 * unless a fault pauses it); replicas and failover; a store that loses writes
 * without restarting; writes travelling to the resource (a write is checked
 * at the moment it is made); the engine's own token check (maxToken: the
 * modelled store never breaks its promise, so it never fires); HANDOFF: a
 * notice for an attempt the Manager no longer waits with is dropped, as in
 * the engine (the attempt's clean-up release ends that hand-off, or it
 * lapses after its pickup window), and a Manager has one notice on
 * its way at a time (see handOff). One tick is half the TTL (a third with
 * LH_TTL=3): everything shorter is "within the tick".
 */

#define K 4           /* token units per tick of the store's clock */
#define NSLOT 2       /* requests of one Manager that can be in the network */
#define QCAP 3        /* waiter queue capacity (a full queue enqueues nothing) */

/* ---- the configuration (hidden: constant after the first step) */
hidden byte TTL;        /* the one (and so the longest) TTL, in ticks: 2 or 3 */
hidden byte PICKUP;     /* HANDOFF: the pickup window, in ticks, below TTL */
hidden byte QTTL;       /* HANDOFF: a queue entry's expiry, renewed by its waiter's polls */
hidden byte NMGR;       /* Managers: 2 or 3 */
hidden byte TMAX;       /* the clock stops after TMAX ticks (0: it runs for ever) */
hidden byte MAXATT;     /* acquire attempts per Manager */
hidden byte MAXFAULT;   /* lost messages, early errors, lost notices, pauses (LIVE) */
hidden byte MAXRESTART; /* store restarts without data */
hidden byte DRIFT;      /* store ticks the store's clock may gain */
hidden byte CLOSE;      /* the last Manager may be closed (Manager.Close) */
hidden byte HANDOFF;    /* the store has the waiter queue of HANDOFF.md */
hidden byte DEAD;       /* M2 may die while it waits (a dead contender) */
hidden byte LIVE;       /* the liveness configuration (see the roles below) */
hidden int V;           /* the broken variant (bits), 0 for the design */

/* The broken variants, each breaking one decision of the design. */
#define vNOMARGIN    ((V & 1) != 0)   /* safetyMargin = 0 */
#define vRECVDEADLINE ((V & 2) != 0)  /* localDeadline from the receive time */
#define vRELBYOWNER  ((V & 4) != 0)   /* the store releases by owner, not by holding */
#define vSAMEOWNER   ((V & 8) != 0)   /* the store refreshes any holding of the same owner */
#define vNOGRACE     ((V & 16) != 0)  /* no restart grace */
#define vNOPICKUP    ((V & 32) != 0)  /* a handed-off grant lasts a TTL, not the pickup window */
#define vASWRITTEN   ((V & 64) != 0)  /* HANDOFF as first written: the head's turn after an expiry lasts as long as its entry */
#define vCLOCKLESS   ((V & 128) != 0) /* tokens from the counter only (no clock part) */
#define vNOTICEARRIVAL ((V & 256) != 0) /* a hand-off taken from its notice: the local deadline from the notice's arrival */
#define vANYPOLL     ((V & 512) != 0) /* a hand-off taken from its notice whatever poll number it carries */

c_decl {
	static int lhcfg(const char *k, int d) { const char *v = getenv(k); return v && *v ? atoi(v) : d; }
}

/* safetyMargin(TTL), and of the pickup window (safetyMargin(pickup)): the
   drift it covers, in ticks. (The engine's is a tenth of the window; in ticks
   of half a TTL, no margin is shorter than the drift it is there for.) */
#define MARGIN (vNOMARGIN -> 0 : DRIFT)

/* ---- time */
byte now;             /* ticks so far, when TMAX bounds them (else 0) */
unsigned sSince : 2;  /* store ticks since the last restart (saturates at TTL) */
byte sBase;           /* the clock part of tokens at the last restart */
unsigned skew : 2;    /* ticks the store's clock has gained */
hidden byte clockT, sclockT; /* the two clocks for the trace (not state) */

/* ---- the store, for the one name */
unsigned sAtt : 3;    /* attempt of the live holding (0: none; expiry deletes it) */
byte sTok;            /* its token */
unsigned sLeft : 2;   /* store ticks until it expires */
bit sPick;            /* HANDOFF: it is a hand-off not yet picked up */
byte sCounter;        /* the fencing counter (lost on restart) */
unsigned sGrace : 2;  /* store ticks of restart grace left */
unsigned restarts : 2;
typedef Entry {
	unsigned att : 3;     /* a waiting attempt */
	unsigned left : 2;    /* store ticks until the entry expires */
	bit cur               /* its poll number (the latest acquire of the attempt the
	                         store processed) is its Manager's latest (see queueRequest) */
};
Entry q[QCAP];        /* HANDOFF: the waiter queue, head first */
unsigned qLen : 2;
unsigned sTurnOf : 3; /* HANDOFF: the head whose turn began (turnOf), 0: none */
unsigned sTurn : 2;   /* store ticks since that turn began (saturates at PICKUP) */

#define mgrOf(a) (((a) - 1) / MAXATT)   /* attempt ids are per Manager (instance.n) */
#define live (sAtt != 0)

/* ---- ghosts for the properties */
byte lastTok;         /* the newest token ever granted (survives restarts) */
unsigned unowned : 3; /* ticks the live holding has been owned by nobody */
bit released0;        /* LIVE: the store applied M0's release of its holding */
bit acquired1;        /* LIVE: M1 has held the name */

/* Each assertion names its property (model_test.go reads the name from a
   violation): these are always 0. */
hidden byte a_twoHolders, b_staleHolder, c_tokensIncrease, d_unownedLonger, e_deadContenderDelays;

/* scratch (hidden: always written before it is read within one step) */
hidden byte s_, i_, a_, b_, c_, t_, r_, rt_, rq_, qd_, d_;

/* ---- the network: per Manager, NSLOT requests in flight or answered */
#define FREE 0
#define REQ  1        /* on its way to the store */
#define REP  2        /* applied; the answer is on its way back */
#define ACQUIRE 1
#define RENEW   2
#define RELEASE 3
#define R_OK      1   /* acquired / renewed / released */
#define R_BUSY    2   /* Grant{Acquired:false} */
#define R_NOTHELD 3   /* ErrNotHeld */
typedef Slot {
	unsigned stage : 2;
	unsigned kind : 2;    /* ACQUIRE, RENEW, RELEASE */
	bit awaited;          /* its Manager still awaits the answer (Seq matches) */
	unsigned att : 3;
	byte tok;
	unsigned res : 2;     /* the store's answer */
	byte rtok;            /* the token in it */
	bit cur;              /* HANDOFF, an acquire: its poll number is its Manager's latest */
	bit queued            /* HANDOFF, a refusal: the attempt has a queue entry (Grant.Queued) */
};
Slot net[6];
unsigned faults : 3;

/* ---- the lease actor, one per Manager */
#define IDLE   0
#define ACQ    1      /* op == opAcquiring */
#define HELD   2      /* cur != nil */
#define REL    3      /* op == opReleasing */
#define POLL   4      /* polling: the head waiter waits for a retry tick or a notice */
#define CLOSED 5
typedef Mgr {
	unsigned phase : 3;
	unsigned att : 3;     /* the attempt in progress, or the holding's */
	byte tok;             /* the holding's token */
	unsigned dl : 2;      /* ticks left until cur.deadline (HELD) */
	unsigned age : 2;     /* ticks since the acquire or renewal in flight was sent (acq.sent, own.sent) */
	bit renewing;         /* cur.renewing */
	bit renewDue;         /* cur.nextRenew has come (set by each tick) */
	bit pollDue;          /* the poll's retry tick has come (set by each tick) */
	bit waiting;          /* an answer is awaited (the Seq of the call in flight) */
	unsigned nAcq : 3;    /* attempts made */
	unsigned relAtt : 3;  /* the release in flight, or unconfirmed (pendingRelease) */
	byte relTok;
	unsigned relLeft : 2; /* ticks until an unconfirmed release's holding has surely expired (until) */
	bit unconf;           /* relAtt is unconfirmed (in a.unconfirmed) */
	bit closing;          /* Close was called (a.shutdown) */
	bit dead;             /* the Manager died (a dead contender) */
	/* HANDOFF (lease_handoff.go) */
	bit pickup;           /* cur.handOff: a hand-off held from its notice, to renew to the TTL */
	bit noticed;          /* acq.noticed: a notice came while the acquire was in flight */
	bit queued;           /* w.queued: the last refusal said the attempt is queued */
	unsigned pollAge : 2; /* ticks since the latest poll was sent (w.pollSent; saturates
	                         where a notice can no longer be taken) */
	bit notice;           /* a hand-off's notice (HandOff) on its way to it, carrying: */
	unsigned nAtt : 3;    /*   the attempt */
	byte nTok;            /*   the new holding's token */
	bit nCur              /*   its Poll is the Manager's latest poll number */
};
Mgr mg[3];
/* M0 and M1 are configured with the same owner, M2 with another */
#define owner(m) ((m) < 2 -> 1 : 2)

/* holds: the Manager has the name and its local deadline has not passed. */
#define holds(m) (mg[m].phase == HELD && mg[m].dl > 0)

#define trace(...) printf("t=%d st=%d  ", clockT, sclockT); printf(__VA_ARGS__)

/* localDeadline: ticks left from now to the send time of the request that
   produced the answer, plus TTL, minus safetyMargin (0: passed).
   RECVDEADLINE: from the receive time instead. */
#define localDeadline(m) (vRECVDEADLINE -> TTL - MARGIN : (mg[m].age < TTL - MARGIN -> TTL - MARGIN - mg[m].age : 0))

/* ---- roles: which decisions a Manager may take (all of them in the safety
   runs). LIVE: M0 holds once and releases; M1 waits for the name until it
   has it (its caller tries again after an error); M2 waits once and may die
   while it waits, give up, or hold and release without renewing. */
#define wantsNext(m) (mg[m].nAcq < (LIVE && m != 1 -> 1 : MAXATT))
#define mayGiveUp(m) (!LIVE || m == 2)         /* a caller that gives up (cancel, timeout) */
#define mayRenew(m)  (!LIVE || m == 0)
#define mayDie(m)    (DEAD && m == 2)
#define mayClose(m)  (CLOSE && m == NMGR - 1)

/* ---------------- the store ---------------- */

/* newToken: max(counter + 1, store clock), as acquire.lua does, with the
   clock kept relative so that time can run for ever. Until the first restart
   only the order of tokens matters, and the counter alone gives the order
   the clock would (both grow with every grant): the clock part is left out.
   A restart forgets the counter, not the clock: at the restart the clock (in
   token units) is taken to be at most K - 1 behind the newest token (the
   counter runs ahead of the clock only by the grants of one tick, fewer than
   K), and it gains K per store tick after it (counted up to the TTL, when it
   is surely past every earlier token). */
inline newToken() {
	t_ = sCounter + 1;
	if :: restarts > 0 && !vCLOCKLESS && t_ < sBase + sSince * K -> t_ = sBase + sSince * K :: else -> skip fi;
	if :: t_ <= lastTok -> trace("store: new token %d is not above token %d\n", t_, lastTok) :: else -> skip fi;
	assert(c_tokensIncrease || t_ > lastTok); /* (c) tokens strictly increase */
	lastTok = t_; sCounter = t_
}

/* clearNotice: the notice to Manager m is read (or lost). */
inline clearNotice(m) {
	mg[m].notice = false; mg[m].nAtt = 0; mg[m].nTok = 0; mg[m].nCur = false
}

/* grant makes a new holding for attempt a that lasts n store ticks. */
inline grant(a, n) {
	newToken();
	sAtt = a; sTok = t_; sLeft = n; sPick = false; unowned = 0
}

/* dequeue takes attempt a out of the waiter queue. */
inline dequeue(a) {
	i_ = 0;
	do
	:: i_ < qLen && q[i_].att != a -> i_++
	:: i_ < qLen && q[i_].att == a ->
		do
		:: i_ + 1 < qLen -> q[i_].att = q[i_ + 1].att; q[i_].left = q[i_ + 1].left; q[i_].cur = q[i_ + 1].cur; i_++
		:: else -> break
		od;
		qLen--; q[qLen].att = 0; q[qLen].left = 0; q[qLen].cur = 0;
		break
	:: i_ >= qLen -> break
	od
}

/* dropExpired takes the expired entries out of the queue. */
inline dropExpired() {
	i_ = 0;
	do
	:: i_ < qLen && q[i_].left > 0 -> i_++
	:: i_ < qLen && q[i_].left == 0 -> b_ = q[i_].att; dequeue(b_); i_ = 0
	:: i_ >= qLen -> break
	od
}

/* enqueue (enqueueLocked): a refused attempt whose caller waits joins the
   queue once; an attempt already queued keeps its place, and its entry is
   renewed. Either way the entry records the poll number of this acquire (c:
   whether it is its Manager's latest), even one lower than it had: a late
   copy of an earlier poll. qd_: the attempt has an entry (Grant.Queued). */
inline enqueue(a, c) {
	qd_ = false;
	if
	:: HANDOFF ->
		i_ = 0;
		do
		:: i_ < qLen && q[i_].att != a -> i_++
		:: i_ < qLen && q[i_].att == a -> q[i_].left = QTTL; q[i_].cur = c; qd_ = true; break
		:: i_ >= qLen -> break
		od;
		if
		:: !qd_ ->
			/* a new entry: the expired ones make room first */
			dropExpired();
			if
			:: qLen < QCAP -> q[qLen].att = a; q[qLen].left = QTTL; q[qLen].cur = c; qLen++; qd_ = true
			:: else -> skip
			fi
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* deadDelay: (e) the store refuses live Manager m because of dead Manager d's
   turn (a hand-off not picked up, or the head's turn after an expiry), and
   that turn began `ago` store ticks ago: a dead contender may delay the
   others at most the pickup window. */
#define deadDelay(m, d, ago) (!mg[m].dead && mg[d].dead && (ago) >= PICKUP)

/* handOff (handOnLocked): HANDOFF, in the releasing step: the head live
   entry gets the name for the pickup window, and only its Manager is told:
   the notice names the attempt and the new token, and carries the poll number
   the entry recorded (b_: whether it is the Manager's latest).
   A notice is sent at most once and may be lost. A Manager reads one notice
   at a time: when a second one comes while the first is still on its way
   (the first hand-off lapsed unread), one of the two is lost, either one.
   That leaves out only both arriving; the Manager's answer to the first of
   them (take it, wake, ignore it) makes it ignore the second, or the second is
   stale, or (in state acquiring) it only hastens a poll. */
inline handOff() {
	dropExpired();
	if
	:: HANDOFF && qLen > 0 ->
		a_ = q[0].att; b_ = q[0].cur; dequeue(a_);
		d_ = (vNOPICKUP -> TTL : PICKUP); grant(a_, d_); sPick = true;
		sTurnOf = 0; sTurn = 0;
		i_ = mgrOf(sAtt);
		trace("store: hand-off to M%d attempt %d token %d, %d ticks to pick it up (latest poll: %d)\n", i_, sAtt, sTok, sLeft, b_);
		if
		:: mg[i_].dead -> skip /* nobody reads it */
		:: !mg[i_].dead && (!mg[i_].notice || LIVE) ->
			mg[i_].notice = true; mg[i_].nAtt = sAtt; mg[i_].nTok = sTok; mg[i_].nCur = b_
		:: !mg[i_].dead && mg[i_].notice && !LIVE ->
			trace("net: the notice to M%d lost (another is on its way)\n", i_)
		fi
	:: else -> skip
	fi
}

/* storeAcquire: Backend.Acquire (acquire.lua), for the request in slot s. */
inline storeAcquire(m, s) {
	a_ = net[s].att;
	if
	:: live && (sAtt == a_ || (vSAMEOWNER && owner(mgrOf(sAtt)) == owner(m))) ->
		/* the same attempt again: refresh, keep the token (a pickup, too) */
		sLeft = TTL; sPick = false; unowned = 0;
		net[s].res = R_OK; net[s].rtok = sTok;
		trace("store: acquire M%d attempt %d refreshes token %d\n", m, a_, sTok)
	:: live && !(sAtt == a_ || (vSAMEOWNER && owner(mgrOf(sAtt)) == owner(m))) ->
		net[s].res = R_BUSY; c_ = net[s].cur; enqueue(a_, c_); net[s].queued = qd_;
		trace("store: acquire M%d attempt %d refused (token %d holds)\n", m, a_, sTok);
		assert(e_deadContenderDelays || !(sPick && deadDelay(m, mgrOf(sAtt), (vNOPICKUP -> TTL : PICKUP) - sLeft)))
	:: !live && sGrace > 0 && !vNOGRACE ->
		/* restart grace: no record of the name, too soon after the restart */
		net[s].res = R_BUSY; c_ = net[s].cur; enqueue(a_, c_); net[s].queued = qd_;
		trace("store: acquire M%d attempt %d refused (restart grace)\n", m, a_)
	:: !live && (sGrace == 0 || vNOGRACE) ->
		dropExpired();
		/* turnLocked: the head's turn begins when an acquire first finds the
		   name free with that head (the store records when, and whose) */
		if
		:: HANDOFF && qLen > 0 && q[0].att != a_ && sTurnOf != q[0].att ->
			sTurnOf = q[0].att; sTurn = 0;
			trace("store: attempt %d's turn begins\n", sTurnOf)
		:: else -> skip
		fi;
		if
		:: HANDOFF && qLen > 0 && q[0].att != a_ && (sTurn < PICKUP || vASWRITTEN) ->
			/* the head's turn: keep the arrival order */
			net[s].res = R_BUSY;
			trace("store: acquire M%d attempt %d refused (attempt %d's turn)\n", m, a_, q[0].att);
			assert(e_deadContenderDelays || !deadDelay(m, mgrOf(q[0].att), sTurn));
			c_ = net[s].cur; enqueue(a_, c_); net[s].queued = qd_
		:: else ->
			if
			:: HANDOFF && qLen > 0 && q[0].att != a_ ->
				trace("store: attempt %d let its turn pass\n", q[0].att);
				b_ = q[0].att; dequeue(b_)
			:: else -> skip
			fi;
			dequeue(a_); sTurnOf = 0; sTurn = 0;
			grant(a_, TTL);
			net[s].res = R_OK; net[s].rtok = sTok;
			trace("store: acquire M%d attempt %d granted token %d\n", m, a_, sTok)
		fi
	fi
}

/* storeRenew: Backend.Renew (renew.lua) names the holding (attempt, token). */
inline storeRenew(m, s) {
	if
	:: live && sAtt == net[s].att && sTok == net[s].tok ->
		sLeft = TTL; sPick = false; unowned = 0; net[s].res = R_OK;
		trace("store: renew M%d token %d\n", m, sTok)
	:: else ->
		net[s].res = R_NOTHELD;
		trace("store: renew M%d token %d: not held\n", m, net[s].tok)
	fi
}

/* storeRelease: Backend.Release (release.lua) names the holding (attempt,
   and token unless 0); RELBYOWNER: by owner instead. Nil either way.
   HANDOFF: in the same step the name goes to the head live entry; a release
   that matches no holding takes the attempt out of the queue (leaveQueue). */
inline storeRelease(m, s) {
	if
	:: live && (sAtt == net[s].att || (vRELBYOWNER && owner(mgrOf(sAtt)) == owner(m))) &&
	   (net[s].tok == 0 || net[s].tok == sTok) ->
		trace("store: release M%d attempt %d token %d deletes token %d\n", m, net[s].att, net[s].tok, sTok);
		if :: mgrOf(sAtt) == 0 && m == 0 -> released0 = true :: else -> skip fi;
		sAtt = 0; sTok = 0; sLeft = 0; sPick = false;
		a_ = net[s].att; dequeue(a_);
		handOff()
	:: else ->
		a_ = net[s].att; dequeue(a_);
		trace("store: release M%d attempt %d token %d: nothing to release\n", m, net[s].att, net[s].tok)
	fi;
	net[s].res = R_OK
}

/* restart: the store comes back without data. Its clock (and so the time
   part of new tokens) survives; the counter, the holding and the queue do
   not. */
inline restart() {
	sAtt = 0; sTok = 0; sLeft = 0; sPick = false; sCounter = 0; restarts++;
	sSince = 0; sBase = (lastTok >= K - 1 -> lastTok - (K - 1) : 0);
	/* NOGRACE: the clock is taken to be past every earlier token already
	   (as a microsecond clock would be), so that what breaks is the
	   overlap, not the tokens */
	if :: vNOGRACE -> sBase = lastTok + 1 :: else -> skip fi;
	qLen = 0; q[0].att = 0; q[1].att = 0; q[2].att = 0; q[0].left = 0; q[1].left = 0; q[2].left = 0;
	q[0].cur = 0; q[1].cur = 0; q[2].cur = 0;
	sTurnOf = 0; sTurn = 0;
	sGrace = (vNOGRACE -> 0 : TTL);
	trace("store: RESTART without data\n")
}

/* storeTick: one tick of the store's clock: the holding, the grace, the
   head's turn and the queue entries run down; an expiry frees the name. */
inline storeTick() {
	if :: sSince < TTL -> sSince++ :: else -> skip fi;
	sclockT++;
	if
	:: sLeft > 1 -> sLeft--
	:: sLeft == 1 ->
		trace("store: token %d expires\n", sTok);
		sAtt = 0; sTok = 0; sLeft = 0; sPick = false
	:: else -> skip
	fi;
	if :: sTurnOf != 0 && sTurn < PICKUP -> sTurn++ :: else -> skip fi;
	if :: sGrace > 0 -> sGrace-- :: else -> skip fi;
	if :: q[0].left > 0 -> q[0].left-- :: else -> skip fi;
	if :: q[1].left > 0 -> q[1].left-- :: else -> skip fi;
	if :: q[2].left > 0 -> q[2].left-- :: else -> skip fi
}

/* ---------------- the environment ---------------- */

/* owned: some Manager holds the store's holding or is acquiring it. */
#define ownedBy(m) (sAtt == mg[m].att && !mg[m].dead && (holds(m) || (mg[m].phase == ACQ)))
#define owned (ownedBy(0) || ownedBy(1) || ownedBy(2))

/* managerTick: one tick of the Managers' clock. */
inline managerTick(m) {
	if :: mg[m].dl > 0 -> mg[m].dl-- :: else -> skip fi;
	/* age counts only while an acquire or a renewal is awaited, up to the
	   point where its answer is late anyway */
	if :: mg[m].age < TTL - MARGIN && mg[m].waiting && (mg[m].phase == ACQ || mg[m].renewing) -> mg[m].age++ :: else -> skip fi;
	if
	:: mg[m].unconf && mg[m].relLeft > 1 -> mg[m].relLeft--
	:: mg[m].unconf && mg[m].relLeft == 1 && mg[m].phase != REL ->
		/* retryUnconfirmed: its TTL has passed, forget it */
		mg[m].relLeft = 0; mg[m].unconf = false; mg[m].relAtt = 0; mg[m].relTok = 0
	:: else -> skip
	fi;
	mg[m].renewDue = (mg[m].phase == HELD);
	mg[m].pollDue = (LIVE && mg[m].phase == POLL);
	/* w.pollSent, counted up to where a notice can no longer be taken */
	if
	:: HANDOFF && (mg[m].phase == ACQ || mg[m].phase == POLL) && mg[m].pollAge < PICKUP - MARGIN -> mg[m].pollAge++
	:: else -> skip
	fi
}

/* tick: the clock advances one tick; (d) is counted here. */
inline tick() {
	if :: TMAX > 0 -> now++ :: else -> skip fi;
	clockT++;
	managerTick(0); managerTick(1); managerTick(2);
	storeTick();
	if
	:: live && !owned -> unowned++
	:: else -> unowned = 0
	fi;
	/* (d) no grant stays owned by nobody longer than the TTL */
	assert(d_unownedLonger || unowned <= TTL)
}

/* quiet (LIVE): nothing is due within the tick: no message on its way, no
   answer or notice unread, no deadline or poll due. A tick while something is
   due is a pause (a Manager or the network slow for a tick): a fault. */
#define dueM(m) (!mg[m].dead && ((mg[m].phase == HELD && mg[m].dl == 0) || (mg[m].phase == POLL && mg[m].pollDue) || mg[m].notice))
#define quiet (net[0].stage == FREE && net[1].stage == FREE && net[2].stage == FREE && \
	net[3].stage == FREE && net[4].stage == FREE && net[5].stage == FREE && \
	!dueM(0) && !dueM(1) && !dueM(2))

/* freeSlot forgets everything about slot sl (no stale state). */
inline freeSlot(sl) {
	net[sl].stage = FREE; net[sl].kind = 0; net[sl].awaited = false; net[sl].att = 0;
	net[sl].tok = 0; net[sl].res = 0; net[sl].rtok = 0; net[sl].cur = false; net[sl].queued = false
}

inline deliver(sl) {
	if
	:: net[sl].kind == ACQUIRE -> storeAcquire(sl / NSLOT, sl)
	:: net[sl].kind == RENEW -> storeRenew(sl / NSLOT, sl)
	:: net[sl].kind == RELEASE -> storeRelease(sl / NSLOT, sl)
	fi;
	/* an answer nobody awaits any more is dropped on arrival; an answer
	   keeps only what it says */
	if
	:: net[sl].awaited -> net[sl].stage = REP; net[sl].kind = 0; net[sl].att = 0; net[sl].tok = 0; net[sl].cur = false
	:: else -> freeSlot(sl)
	fi
}

active proctype Env() {
	/* readConfig: the configuration, from the environment (model_test.go) */
	c_code {
		TTL = lhcfg("LH_TTL", 2); PICKUP = lhcfg("LH_PICKUP", 1); QTTL = lhcfg("LH_QTTL", 3);
		NMGR = lhcfg("LH_NM", 3); TMAX = lhcfg("LH_TMAX", 0); MAXATT = lhcfg("LH_MAXATT", 2);
		MAXFAULT = lhcfg("LH_MAXFAULT", 2); MAXRESTART = lhcfg("LH_MAXRESTART", 1);
		DRIFT = lhcfg("LH_DRIFT", 1); CLOSE = lhcfg("LH_CLOSE", 1); HANDOFF = lhcfg("LH_HANDOFF", 0);
		DEAD = lhcfg("LH_DEAD", 0); LIVE = lhcfg("LH_LIVE", 0); V = lhcfg("LH_V", 0);
	};
	assert(!(LIVE && MAXRESTART > 0)); /* LIVE keeps no restart */
	assert(NMGR * MAXATT <= 7 && MAXFAULT <= 7); /* the widths of att and faults */
	assert(TTL >= 2 && TTL <= 3 && PICKUP >= 1 && PICKUP < TTL && QTTL > PICKUP && QTTL <= 3); /* the widths of the timers */
	atomic {
		run Manager(0); run Manager(1);
		if :: NMGR > 2 -> run Manager(2) :: else -> skip fi
	}
end:	do
	:: atomic { (TMAX == 0 || now < TMAX) && (!LIVE || quiet || faults < MAXFAULT) ->
		if :: LIVE && !quiet -> faults++; trace("a pause: the clock runs while something is due\n") :: else -> skip fi;
		tick() }
	:: atomic { skew < DRIFT -> skew++; trace("store clock gains a tick\n"); storeTick() }
	:: atomic { restarts < MAXRESTART -> restart() }
	/* deliver a request to the store */
	:: atomic {
		(net[0].stage == REQ || net[1].stage == REQ || net[2].stage == REQ ||
		 net[3].stage == REQ || net[4].stage == REQ || net[5].stage == REQ) ->
		if
		:: net[0].stage == REQ -> s_ = 0
		:: net[1].stage == REQ -> s_ = 1
		:: net[2].stage == REQ -> s_ = 2
		:: net[3].stage == REQ -> s_ = 3
		:: net[4].stage == REQ -> s_ = 4
		:: net[5].stage == REQ -> s_ = 5
		fi;
		deliver(s_) }
	/* lose a request, or an answer after the store applied the request */
	:: atomic {
		faults < MAXFAULT && (net[0].stage != FREE || net[1].stage != FREE || net[2].stage != FREE ||
		 net[3].stage != FREE || net[4].stage != FREE || net[5].stage != FREE) ->
		if
		:: net[0].stage != FREE -> s_ = 0
		:: net[1].stage != FREE -> s_ = 1
		:: net[2].stage != FREE -> s_ = 2
		:: net[3].stage != FREE -> s_ = 3
		:: net[4].stage != FREE -> s_ = 4
		:: net[5].stage != FREE -> s_ = 5
		fi;
		faults++;
		if
		:: net[s_].stage == REQ && net[s_].kind == ACQUIRE -> trace("net: M%d's acquire (attempt %d) lost\n", s_ / NSLOT, net[s_].att)
		:: net[s_].stage == REQ && net[s_].kind == RENEW -> trace("net: M%d's renew (attempt %d token %d) lost\n", s_ / NSLOT, net[s_].att, net[s_].tok)
		:: net[s_].stage == REQ && net[s_].kind == RELEASE -> trace("net: M%d's release (attempt %d token %d) lost\n", s_ / NSLOT, net[s_].att, net[s_].tok)
		:: else -> trace("net: the answer to M%d lost\n", s_ / NSLOT)
		fi;
		freeSlot(s_) }
	/* lose a hand-off's notice */
	:: atomic {
		faults < MAXFAULT && (mg[0].notice || mg[1].notice || mg[2].notice) ->
		if
		:: mg[0].notice -> i_ = 0
		:: mg[1].notice -> i_ = 1
		:: mg[2].notice -> i_ = 2
		fi;
		faults++; clearNotice(i_); trace("net: the notice to M%d lost\n", i_) }
	od
}

/* ---------------- the lease actor ---------------- */

/* unawait: the Manager stops awaiting its call (the Seq moves on); an
   answer already there is dropped, a request still in the network may yet
   be applied. */
inline unawait(m) {
	if :: net[m * NSLOT].stage == REP -> freeSlot(m * NSLOT) :: else -> net[m * NSLOT].awaited = false fi;
	if :: net[m * NSLOT + 1].stage == REP -> freeSlot(m * NSLOT + 1) :: else -> net[m * NSLOT + 1].awaited = false fi;
	mg[m].waiting = false
}

/* canSend: a slot is free once the answer awaited (if any) is dropped. */
#define canSend(m) (net[m * NSLOT].stage != REQ || net[m * NSLOT + 1].stage != REQ)

/* send puts a request in a free slot of Manager m with a fresh Seq; age
   counts from now (acq.sent, own.sent). */
inline send(m, k, a, t) {
	unawait(m);
	mg[m].waiting = true; mg[m].age = 0;
	/* age counts only for an acquire or a renewal */
	if
	:: net[m * NSLOT].stage == FREE -> s_ = m * NSLOT
	:: else -> s_ = m * NSLOT + 1
	fi;
	assert(net[s_].stage == FREE);
	net[s_].stage = REQ; net[s_].kind = k; net[s_].awaited = true;
	net[s_].att = a; net[s_].tok = t; net[s_].res = 0; net[s_].rtok = 0;
	/* an acquire carries the latest poll number (see queueRequest) */
	net[s_].cur = (HANDOFF && k == ACQUIRE); net[s_].queued = false
}

/* forget clears the attempt and holding (the model keeps no stale state).
   A notice still on its way for the attempt is dropped with it: the Manager
   would find that nobody here waits with its attempt, and the attempt's
   clean-up release (or the pickup window) ends the hand-off. */
inline forget(m) {
	mg[m].att = 0; mg[m].tok = 0; mg[m].dl = 0; mg[m].age = 0;
	mg[m].renewing = false; mg[m].renewDue = false; mg[m].pollDue = false;
	mg[m].pickup = false; mg[m].noticed = false; mg[m].queued = false; mg[m].pollAge = 0;
	clearNotice(m)
}

/* queueRequest: HANDOFF, the poll number of the acquire about to be sent:
   one more than the last of the attempt (w.polls). The numbers are kept
   relative to the Manager's latest, which is all it compares them with (a
   notice's Poll against w.polls): a number in the system (an acquire on its
   way, a queue entry, a notice) is the latest (cur) or earlier. A new number
   makes every earlier one of the Manager earlier; one of an attempt it no
   longer waits with is never compared, and is kept as earlier. pollAge
   (w.pollSent) counts from this send: a retry of the same acquire after an
   error (the backend's own retry) keeps the number and the send time. */
inline queueRequest(m) {
	if
	:: HANDOFF ->
		mg[m].pollAge = 0; mg[m].nCur = false;
		net[m * NSLOT].cur = false; net[m * NSLOT + 1].cur = false;
		if :: q[0].att != 0 && mgrOf(q[0].att) == m -> q[0].cur = false :: else -> skip fi;
		if :: q[1].att != 0 && mgrOf(q[1].att) == m -> q[1].cur = false :: else -> skip fi;
		if :: q[2].att != 0 && mgrOf(q[2].att) == m -> q[2].cur = false :: else -> skip fi
	:: else -> skip
	fi
}

/* startRelease: release (attempt, token) detached; token 0 means whatever
   holding the attempt made (and, HANDOFF, its queue entry). */
inline startRelease(m, a, t) {
	assert(mg[m].relAtt == 0);
	mg[m].relAtt = a; mg[m].relTok = t; mg[m].unconf = false; mg[m].relLeft = 0;
	forget(m); mg[m].phase = REL;
	trace("M%d: release attempt %d token %d\n", m, a, t);
	a_ = mg[m].relAtt; t_ = mg[m].relTok; send(m, RELEASE, a_, t_)
}

/* startNext: a new acquire attempt with its own attempt id. */
inline startNext(m) {
	mg[m].nAcq++; mg[m].att = m * MAXATT + mg[m].nAcq;
	mg[m].phase = ACQ;
	trace("M%d: acquire attempt %d\n", m, mg[m].att);
	queueRequest(m); a_ = mg[m].att; send(m, ACQUIRE, a_, 0)
}

/* hold: a claimed grant becomes the holding, with d ticks to its local
   deadline. A notice of the attempt that comes now is ignored (picked up
   already). */
inline hold(m, t, d) {
	mg[m].dl = d;
	mg[m].phase = HELD; mg[m].tok = t; mg[m].renewing = false; mg[m].renewDue = false; mg[m].age = 0;
	mg[m].pickup = false; mg[m].noticed = false; mg[m].queued = false; mg[m].pollAge = 0; clearNotice(m);
	if :: m == 1 -> acquired1 = true :: else -> skip fi;
	trace("M%d: HOLDS token %d for %d ticks\n", m, t, mg[m].dl)
}

/* lose: the holding is lost; release it in case the store still has it. */
inline lose(m) {
	trace("M%d: LOST token %d\n", m, mg[m].tok);
	t_ = mg[m].tok; a_ = mg[m].att;
	startRelease(m, a_, t_)
}

#define hasRep(m) (net[m * NSLOT].stage == REP || net[m * NSLOT + 1].stage == REP)
#define repSlot(m) (net[m * NSLOT].stage == REP -> m * NSLOT : m * NSLOT + 1)
/* the deadline check comes first, whatever the message (handle) */
#define pastDeadline(m) (mg[m].phase == HELD && mg[m].dl == 0)
#define late(m) (!vRECVDEADLINE && mg[m].age >= TTL - MARGIN)
/* the call awaited fails: its message was lost, or it times out while the
   request is still in the network (a fault: it may be applied later) */
#define callFails(m) (mg[m].waiting && !hasRep(m) && !pastDeadline(m) && canSend(m) && \
	(!((net[m * NSLOT].stage == REQ && net[m * NSLOT].awaited) || (net[m * NSLOT + 1].stage == REQ && net[m * NSLOT + 1].awaited)) || faults < MAXFAULT))

/* take reads the answer awaited into r_ and rt_ and frees its slot. */
inline take(m) {
	s_ = repSlot(m); r_ = net[s_].res; rt_ = net[s_].rtok; rq_ = net[s_].queued; freeSlot(s_); mg[m].waiting = false
}

/* fail: the call awaited failed (counted as a fault when its request is
   still on its way). */
inline fail(m) {
	if
	:: (net[m * NSLOT].stage == REQ && net[m * NSLOT].awaited) || (net[m * NSLOT + 1].stage == REQ && net[m * NSLOT + 1].awaited) -> faults++
	:: else -> skip
	fi;
	unawait(m);
	trace("M%d: call failed (ambiguous)\n", m)
}

/* leaveWaiting: a waiter is done without the name (onWaitTimeout, dropWaiter,
   a refusal its caller does not wait for, Close); HANDOFF: it leaves the
   queue, releasing the hand-off it may have been given (leaveQueue). */
inline leaveWaiting(m) {
	if
	:: HANDOFF -> a_ = mg[m].att; startRelease(m, a_, 0)
	:: else -> forget(m); mg[m].phase = IDLE
	fi
}

/* ---- the lease actor's decisions (lease_actor.go, unconfirmed.go) */

/* releaseThenReply: give back the grant of the attempt in progress (token 0:
   whatever it got) before the caller hears of it. */
inline releaseThenReply(m, t) {
	a_ = mg[m].att; startRelease(m, a_, t)
}

/* onHoldTick: past the local deadline the holding is lost, whatever else is
   due (handle checks it first). */
inline onHoldTick(m) {
	lose(m)
}

/* retryUnconfirmed: an unconfirmed release is sent again (before the next
   acquire, or on its timer) until confirmed or its TTL has passed. */
inline retryUnconfirmed(m) {
	trace("M%d: retry the unconfirmed release of attempt %d\n", m, mg[m].relAtt);
	mg[m].phase = REL; a_ = mg[m].relAtt; t_ = mg[m].relTok; send(m, RELEASE, a_, t_)
}

/* onAcquireResult: the store's answer to the attempt in progress. */
inline onAcquireResult(m) {
	take(m);
	if
	:: r_ == R_OK && !mg[m].closing && !late(m) -> d_ = localDeadline(m); hold(m, rt_, d_)
	:: r_ == R_OK && mg[m].closing ->
		trace("M%d: granted token %d after Close\n", m, rt_);
		releaseThenReply(m, rt_)
	:: r_ == R_OK && late(m) ->
		trace("M%d: grant token %d arrived after its local deadline\n", m, rt_);
		releaseThenReply(m, rt_)
	:: r_ == R_OK && !mg[m].closing && !late(m) && mayGiveUp(m) ->
		/* !Ticket.Claim(): startRelease without a reply */
		trace("M%d: caller gave up while token %d was on its way\n", m, rt_);
		a_ = mg[m].att; startRelease(m, a_, rt_)
	:: r_ == R_BUSY && mg[m].closing -> leaveWaiting(m)
	:: r_ == R_BUSY && !mg[m].closing && mg[m].noticed ->
		/* a notice came meanwhile: the same attempt again at once */
		trace("M%d: attempt %d refused after a notice; again\n", m, mg[m].att);
		mg[m].noticed = false; mg[m].queued = rq_;
		queueRequest(m); a_ = mg[m].att; send(m, ACQUIRE, a_, 0)
	:: r_ == R_BUSY && !mg[m].closing && !mg[m].noticed ->
		/* polling: the same attempt again after the retry tick */
		trace("M%d: attempt %d refused; poll\n", m, mg[m].att);
		mg[m].phase = POLL; mg[m].pollDue = false; mg[m].age = 0; mg[m].queued = rq_
	:: r_ == R_BUSY && !mg[m].closing && mayGiveUp(m) ->
		trace("M%d: attempt %d refused; its caller does not wait\n", m, mg[m].att);
		leaveWaiting(m)
	fi
}

/* onCallFailed: the call awaited failed (an error: it may have been
   applied, or be applied later). onAcquireResult with an error retries the
   same attempt (the backend's own retry) or gives up and cleans up;
   onRenewResult retries until the local deadline; settleRelease keeps the
   release as unconfirmed (but not during Close). */
inline onCallFailed(m) {
	fail(m);
	if
	:: mg[m].phase == ACQ && !mg[m].closing ->
		trace("M%d: retry attempt %d\n", m, mg[m].att);
		a_ = mg[m].att; send(m, ACQUIRE, a_, 0)
	:: mg[m].phase == ACQ && (mg[m].closing || mayGiveUp(m)) ->
		trace("M%d: give up attempt %d, clean up\n", m, mg[m].att);
		releaseThenReply(m, 0)
	:: mg[m].phase == HELD ->
		mg[m].renewing = false; mg[m].renewDue = true; mg[m].age = 0;
		trace("M%d: renewal not confirmed\n", m)
	:: mg[m].phase == REL && !mg[m].closing ->
		trace("M%d: release not confirmed\n", m);
		if :: !mg[m].unconf -> mg[m].unconf = true; mg[m].relLeft = TTL :: else -> skip fi;
		mg[m].phase = IDLE
	:: mg[m].phase == REL && mg[m].closing ->
		/* during Close what could not be released is left to expire */
		mg[m].relAtt = 0; mg[m].relTok = 0; mg[m].unconf = false; mg[m].relLeft = 0; mg[m].phase = IDLE
	fi
}

/* onRenewResult: a confirmed renewal moves the local deadline; ErrNotHeld
   loses the holding. */
inline onRenewResult(m) {
	take(m);
	mg[m].renewing = false;
	if
	:: r_ == R_OK -> mg[m].dl = localDeadline(m); mg[m].age = 0; mg[m].pickup = false;
		trace("M%d: renewed token %d for %d ticks\n", m, mg[m].tok, mg[m].dl)
	:: r_ == R_NOTHELD -> lose(m)
	fi
}

/* onReleaseResult: the store answered; the release is done with. */
inline onReleaseResult(m) {
	take(m);
	mg[m].relAtt = 0; mg[m].relTok = 0; mg[m].unconf = false; mg[m].relLeft = 0; mg[m].phase = IDLE
}

/* pollAgain: the retry tick (RetryTick), or wake, and startNext sends the
   waiter's attempt again (with a hand-off, it picks it up). */
inline pollAgain(m) {
	trace("M%d: poll attempt %d\n", m, mg[m].att);
	mg[m].pollDue = false; mg[m].noticed = false; mg[m].phase = ACQ;
	queueRequest(m); a_ = mg[m].att; send(m, ACQUIRE, a_, 0)
}

/* The ticks left of a hand-off taken from its notice: localDeadline(pollSent,
   pickup), from the send of the latest poll (pollAge ticks ago), not from
   the notice. NOTICEARRIVAL: from the notice's arrival instead. */
#define pickupLeft(m) (vNOTICEARRIVAL -> PICKUP - MARGIN : \
	(mg[m].pollAge < PICKUP - MARGIN -> PICKUP - MARGIN - mg[m].pollAge : 0))
/* enough of the window left to renew in: more than a quarter */
#define mayTake(m) (4 * pickupLeft(m) > PICKUP)

/* takeHandOff: the hand-off becomes the holding (state polling), held until
   the end of the pickup window as seen from here; the pickup renewal (to the
   TTL, with the notice's token) is due at once. */
inline takeHandOff(m) {
	t_ = mg[m].nTok; d_ = pickupLeft(m);
	if
	:: true ->
		trace("M%d: notice: takes token %d\n", m, t_);
		hold(m, t_, d_); mg[m].pickup = true; mg[m].renewDue = true
	:: mayGiveUp(m) ->
		/* !Ticket.Claim(): the caller gave up meanwhile */
		trace("M%d: notice for token %d, but its caller gave up\n", m, t_);
		a_ = mg[m].att; startRelease(m, a_, t_)
	fi
}

/* onHandOff: a hand-off's notice comes (HANDOFF). */
inline onHandOff(m) {
	if
	:: mg[m].phase == POLL && mg[m].nAtt == mg[m].att && !mg[m].nCur && !vANYPOLL ->
		/* an earlier poll's: the hand-off was taken back before the store
		   refused the latest */
		trace("M%d: notice of token %d from an earlier poll: ignored\n", m, mg[m].nTok);
		clearNotice(m)
	:: mg[m].phase == POLL && mg[m].nAtt == mg[m].att && (mg[m].nCur || vANYPOLL) &&
	   mg[m].queued && !mg[m].closing && mayTake(m) ->
		takeHandOff(m)
	:: mg[m].phase == POLL && mg[m].nAtt == mg[m].att && (mg[m].nCur || vANYPOLL) &&
	   !(mg[m].queued && !mg[m].closing && mayTake(m)) ->
		trace("M%d: notice of token %d too late to take: poll\n", m, mg[m].nTok);
		clearNotice(m); pollAgain(m)
	:: mg[m].phase == ACQ && mg[m].nAtt == mg[m].att ->
		/* its acquire in flight picks it up, or is retried at once */
		trace("M%d: notice of token %d while acquiring\n", m, mg[m].nTok);
		mg[m].noticed = true; clearNotice(m)
	:: else ->
		/* held already, or nobody here waits with that attempt (the engine
		   releases such a hand-off; here it lapses) */
		trace("M%d: notice of attempt %d token %d: not wanted\n", m, mg[m].nAtt, mg[m].nTok);
		clearNotice(m)
	fi
}

/* onWaitTimeout, dropWaiter: the waiter gives up. */
inline onWaitTimeout(m) {
	trace("M%d: waiter gives up\n", m); leaveWaiting(m)
}

/* startRenew: renew the holding (attempt and token). */
inline startRenew(m) {
	mg[m].renewing = true; mg[m].renewDue = false;
	trace("M%d: renew token %d\n", m, mg[m].tok);
	a_ = mg[m].att; t_ = mg[m].tok; send(m, RENEW, a_, t_)
}

/* onRelease: the caller releases the holding. */
inline onRelease(m) {
	trace("M%d: Release\n", m);
	a_ = mg[m].att; t_ = mg[m].tok; startRelease(m, a_, t_)
}

/* onShutdown: Manager.Close. */
inline onShutdown(m) {
	mg[m].closing = true; trace("M%d: Close\n", m);
	if
	:: mg[m].phase == HELD -> a_ = mg[m].att; t_ = mg[m].tok; startRelease(m, a_, t_)
	:: mg[m].phase == POLL -> leaveWaiting(m)
	:: mg[m].phase == REL && mg[m].unconf ->
		/* a retry of an unconfirmed release: Close does not wait for it */
		unawait(m); mg[m].relAtt = 0; mg[m].relTok = 0; mg[m].unconf = false; mg[m].relLeft = 0; mg[m].phase = IDLE
	:: mg[m].phase == IDLE && mg[m].unconf ->
		mg[m].relAtt = 0; mg[m].relTok = 0; mg[m].unconf = false; mg[m].relLeft = 0
	:: else -> skip /* an acquire in flight: its result releases any grant */
	fi
}

proctype Manager(byte m) {
end:	do
	:: atomic { pastDeadline(m) && canSend(m) -> onHoldTick(m) }
	:: atomic { mg[m].phase == IDLE && mg[m].unconf && !mg[m].closing && canSend(m) -> retryUnconfirmed(m) }
	:: atomic { mg[m].phase == IDLE && !mg[m].unconf && !mg[m].closing && canSend(m) && wantsNext(m) -> startNext(m) }
	:: atomic { mg[m].phase == ACQ && hasRep(m) -> onAcquireResult(m) }
	:: atomic { callFails(m) -> onCallFailed(m) }
	:: atomic { mg[m].phase == HELD && mg[m].dl > 0 && hasRep(m) -> onRenewResult(m) }
	:: atomic { mg[m].phase == REL && hasRep(m) -> onReleaseResult(m) }
	:: atomic { mg[m].phase == POLL && canSend(m) && (!LIVE || mg[m].pollDue) -> pollAgain(m) }
	:: atomic { mg[m].notice && (mg[m].phase != POLL || canSend(m)) -> onHandOff(m) }
	:: atomic { mg[m].phase == POLL && canSend(m) && mayGiveUp(m) -> onWaitTimeout(m) }
	/* a dead contender: its Manager dies while it waits */
	:: atomic { mg[m].phase == POLL && mayDie(m) && !mg[m].dead ->
		mg[m].dead = true; forget(m); mg[m].phase = CLOSED; trace("M%d DIES while it waits\n", m) }
	/* a renewal that is due: the automatic one, or the pickup renewal of a
	   hand-off taken from its notice */
	:: atomic { mg[m].phase == HELD && mg[m].dl > 0 && !mg[m].renewing && mg[m].renewDue && (mayRenew(m) || mg[m].pickup) && canSend(m) -> startRenew(m) }
	:: atomic { mg[m].phase == HELD && mg[m].dl > 0 && canSend(m) -> onRelease(m) }
	:: atomic { mayClose(m) && !mg[m].closing && !mg[m].dead && canSend(m) && !pastDeadline(m) -> onShutdown(m) }
	:: atomic { mg[m].phase == IDLE && mg[m].closing -> mg[m].phase = CLOSED; trace("M%d: closed\n", m) }
	:: atomic { mg[m].phase == CLOSED -> break }
	od
}

#define twoHold ((holds(0) && holds(1)) || (holds(0) && holds(2)) || (holds(1) && holds(2)))
#define staleHolds ((holds(0) && mg[0].tok != lastTok) || (holds(1) && mg[1].tok != lastTok) || (holds(2) && mg[2].tok != lastTok))

/* The monitor: checked in every reachable state.
   (a) no two Managers hold the name with their local deadlines not passed;
   (b) a Manager that holds has the newest token ever granted, so a write it
       makes now passes a resource that refuses tokens lower than the highest
       it has seen only if it is the newest holding's. */
active proctype Safety() {
end:	do
	:: atomic { twoHold -> assert(a_twoHolders || !twoHold) }
	:: atomic { staleHolds -> assert(b_staleHolder || !staleHolds) }
	od
}

/* (e) a waiting Manager eventually acquires once the holder has released */
ltl e { [] (released0 -> <> acquired1) }
