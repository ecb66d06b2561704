/*
 * lease.pml: one name's lease protocol, as decided by the lease actor
 * (actors/lease_actor.go, actors/timing.go) against a store that keeps the
 * backend contract (backend/backend.go). Checked by model_test.go.
 *
 * Three Managers (M0 and M1 configured with the same owner, M2 with another)
 * contend for one name. A store with server-side expiry, a fencing counter and
 * the restart grace answers them over a network that delays, reorders and
 * loses requests and replies. A resource fenced by token takes writes from
 * whoever believes it holds the name.
 *
 * Time is discrete: `now` is the Managers' clock in ticks and advances by
 * itself at any moment, so every step can be delayed past any number of ticks
 * (a paused Manager is one that takes no step while the clock runs; a delayed
 * message is one the network does not deliver). The store's clock is
 * now + skew and may run ahead by up to DRIFT ticks (clock drift within the
 * margin). The run is bounded: the clock stops at TMAX.
 *
 * Names shared with the Go code: startNext, onAcquireResult, hold, startRenew,
 * onRenewResult, onHoldTick (the deadline check, "lose"), lose, onRelease,
 * startRelease, releaseThenReply, onReleaseResult, onShutdown, localDeadline,
 * safetyMargin (MARGIN); the store's Acquire/Renew/Release are storeAcquire,
 * storeRenew, storeRelease.
 *
 * Variants (spin -D), each breaking one decision of the design:
 *   NOMARGIN      safetyMargin = 0
 *   RECVDEADLINE  localDeadline taken when the answer arrives, not at send
 *   RELBYOWNER    the store releases by owner (token 0: whatever the owner
 *                 holds) instead of by holding
 *   SAMEOWNER     the store refreshes any live holding of the same owner
 *                 instead of only the same attempt's
 *   NOGRACE       no restart grace
 *   HANDOFF       the waiter queue with grant-on-release and pickup window:
 *                 THE DESIGN TO BE BUILT, not yet in the Go code
 *   NOPICKUP      (with HANDOFF) a handed-off grant lasts a whole TTL
 *   LIVE          the liveness configuration: M0 holds once and releases, M1
 *                 waits, (with HANDOFF) M2 queues and dies; faults bounded
 */

#ifndef NM
#define NM 3          /* Managers: 3, or 2 (M0 and M1) for the quick run */
#endif
#if defined(HANDOFF) && NM != 3
#error HANDOFF needs three Managers
#endif
#ifndef TTL
#define TTL 3         /* the one (and so the maximum) TTL, in ticks */
#endif
#ifdef NOMARGIN
#define MARGIN 0
#else
#define MARGIN 1      /* safetyMargin(TTL) */
#endif
#ifndef DRIFT
#define DRIFT 1       /* how far the store's clock may gain on the Managers' */
#endif
#ifndef TMAX
#define TMAX 6        /* the clock stops here */
#endif
#ifndef MAXATT
#define MAXATT 2      /* acquire attempts per Manager (safety configuration) */
#endif
#ifndef MAXFAULT
#define MAXFAULT 2    /* lost messages and ambiguous failures, in all */
#endif
#ifndef MAXRESTART
#define MAXRESTART 1  /* store restarts without data */
#endif
#define PICKUP 1      /* the hand-off's pickup window, in ticks */
#define K 4           /* token units per tick of the store's clock */
#define NSLOT 2       /* requests one Manager can have in the network */

/* ---- time */
byte now;             /* the Managers' clock */
byte skew;            /* the store's clock is now + skew */
#define stime (now + skew)

/* localDeadline: the send time of the request that produced the answer,
   plus TTL, minus safetyMargin. RECVDEADLINE: the receive time instead. */
#ifdef RECVDEADLINE
#define localDeadline(sent) (now + TTL - MARGIN)
#else
#define localDeadline(sent) (sent + TTL - MARGIN)
#endif

/* ---- the store, for the one name */
byte sAtt;            /* attempt of the holding (0: no record) */
byte sOwner;          /* its owner */
byte sMgr;            /* ghost: the Manager that sent that attempt */
byte sTok;            /* its token */
byte sExp;            /* its expiry on the store's clock */
byte sCounter;        /* the fencing counter (lost on restart) */
byte sGraceUntil;     /* restart grace: no new record before this store time */
byte restarts;
#ifdef HANDOFF
byte qAtt[NM];        /* waiter queue (attempts) */
byte qMgr[NM];
byte qLen;
bool sPick;           /* the holding is a hand-off not yet picked up */
byte sPickAt;         /* when it was handed off (store time) */
#endif

#define live (sAtt != 0 && stime < sExp)

/* ---- ghosts for the properties */
byte lastTok;         /* the newest token ever granted (survives restarts) */
byte unowned;         /* ticks the live holding has been owned by nobody */
bool released0;       /* LIVE: the store applied M0's release of its holding */
bool acquired1;       /* LIVE: M1 acquired */
/* scratch, not part of the state (BFS, used for the shortest counterexamples,
   cannot have hidden variables: they are then plain, and kept 0 between steps) */
#ifdef BFSRUN
#define HIDDEN
#else
#define HIDDEN hidden
#endif
HIDDEN byte tok_;
HIDDEN byte i_, deq_;
HIDDEN byte slot_, res_, rtok_;

/* ---- the network: per Manager, NSLOT requests in flight or answered */
#define FREE 0
#define REQ  1        /* on its way to the store */
#define REP  2        /* applied; the answer is on its way back */
mtype = { ACQUIRE, RENEW, RELEASE };
#define R_OK      1   /* acquired / renewed / released */
#define R_BUSY    2   /* Grant{Acquired:false} */
#define R_NOTHELD 3   /* ErrNotHeld */
#define R_ERR     4   /* an error: applied or not, nobody knows */
typedef Slot {
	byte stage;
	mtype kind;
	bool awaited; /* its Manager still awaits the answer (Seq matches) */
	byte att;
	byte tok;
	byte res;     /* the store's answer */
	byte rtok;    /* the token in it */
};
Slot net[NM * NSLOT];
byte faults;

/* ---- the lease actor, one per Manager */
#define IDLE   0
#define ACQ    1      /* op == opAcquiring */
#define HELD   2      /* cur != nil */
#define REL    3      /* op == opReleasing */
#define CLOSED 4
byte owner[NM];
byte phase[NM];
byte att[NM];         /* the attempt in progress, or the holding's */
byte tok[NM];         /* the holding's token */
byte deadline[NM];    /* cur.deadline */
byte acqSent[NM];     /* acqSent */
byte renewSent[NM];   /* cur.renewSent */
bool renewing[NM];    /* cur.renewing */
bool waiting[NM];     /* an answer is awaited (the Seq of the call in flight) */
byte nAcq[NM];        /* attempts made */
byte relAtt[NM];      /* an unconfirmed release to retry before the next acquire */
byte relTok[NM];
byte relLive[NM];     /* until when its holding may be live */
bool closing[NM];     /* Close was called (shutdown) */
bool dead[NM];        /* LIVE: the contender died */
byte nextAtt = 1;     /* attempt ids are unique across Managers */

/* holds: the Manager has the name and its local deadline has not passed. */
#define holds(m) (phase[m] == HELD && now < deadline[m])

#define trace(...) printf("t=%d st=%d  ", now, stime); printf(__VA_ARGS__)

#define inFlight(m) ((net[m * NSLOT].stage != FREE && net[m * NSLOT].awaited) || (net[m * NSLOT + 1].stage != FREE && net[m * NSLOT + 1].awaited))
#ifdef LIVE
#define PREMATURE false
#else
#define PREMATURE (faults < MAXFAULT)
#endif
#ifdef HANDOFF
#define HAS_DEAD true
#else
#define HAS_DEAD false
#endif
#ifdef LIVE
#define GAVEUP(m) (m == 2)
#else
#define GAVEUP(m) true
#endif

/* ---------------- the store ---------------- */

#ifdef HANDOFF
/* handOff gives a released (or un-picked-up) name to the head waiter, as a
   holding that lasts the pickup window unless picked up. */
inline handOff() {
	if
	:: qLen > 0 && sAtt == 0 ->
		tok_ = sCounter + 1;
		if :: tok_ < stime * K -> tok_ = stime * K :: else -> skip fi;
		assert(tok_ > lastTok); /* (c) */
		lastTok = tok_; sCounter = tok_;
		sAtt = qAtt[0]; sMgr = qMgr[0]; sOwner = owner[sMgr]; sTok = tok_; tok_ = 0;
#ifdef NOPICKUP
		sExp = stime + TTL;
#else
		sExp = stime + PICKUP;
#endif
		sPick = true; sPickAt = stime;
		qAtt[0] = qAtt[1]; qMgr[0] = qMgr[1];
		qAtt[1] = qAtt[2]; qMgr[1] = qMgr[2];
		qAtt[2] = 0; qMgr[2] = 0;
		qLen--;
		trace("store: hand-off to M%d attempt %d token %d until %d\n", sMgr, sAtt, sTok, sExp)
	:: else -> skip
	fi
}

/* expirePick: a hand-off not picked up in time goes to the next waiter. */
inline expirePick() {
	if
	:: sAtt != 0 && sPick && stime >= sExp ->
		sAtt = 0; sPick = false; handOff()
	:: else -> skip
	fi
}

/* dequeue takes attempt deq_ out of the waiter queue. */
inline dequeue() {
	i_ = 0;
	do
	:: i_ < qLen && qAtt[i_] != deq_ -> i_++
	:: i_ < qLen && qAtt[i_] == deq_ ->
		do
		:: i_ + 1 < NM -> qAtt[i_] = qAtt[i_ + 1]; qMgr[i_] = qMgr[i_ + 1]; i_++
		:: else -> break
		od;
		qAtt[NM - 1] = 0; qMgr[NM - 1] = 0; qLen--;
		break
	:: i_ >= qLen -> break
	od;
	i_ = 0; deq_ = 0
}
#endif

/* storeAcquire: Backend.Acquire. */
inline storeAcquire(m, q) {
#ifdef HANDOFF
	expirePick();
	/* (e) a dead contender's hand-off delays a live one at most PICKUP */
	assert(!(live && sPick && dead[sMgr] && !dead[m] && stime >= sPickAt + PICKUP));
#endif
	if
#ifdef SAMEOWNER
	:: live && sOwner == owner[m] ->
#else
	:: live && sAtt == net[q].att ->
#endif
		/* refresh: same token, new expiry */
		sExp = stime + TTL; net[q].res = R_OK; net[q].rtok = sTok; unowned = 0;
#ifdef HANDOFF
		sPick = false;
#endif
		trace("store: acquire M%d attempt %d refreshes token %d until %d\n", m, net[q].att, sTok, sExp)
	:: live && !(sAtt == net[q].att) ->
		net[q].res = R_BUSY;
#ifdef HANDOFF
		i_ = 0;
		do
		:: i_ < qLen && qAtt[i_] != net[q].att -> i_++
		:: i_ < qLen && qAtt[i_] == net[q].att -> break
		:: i_ >= qLen -> qAtt[qLen] = net[q].att; qMgr[qLen] = m; qLen++; break
		od;
		i_ = 0;
#endif
		trace("store: acquire M%d attempt %d refused (token %d holds)\n", m, net[q].att, sTok)
#ifndef NOGRACE
	:: !live && stime < sGraceUntil ->
		/* restart grace: no record of the name, too soon after the restart */
		net[q].res = R_BUSY;
		trace("store: acquire M%d attempt %d refused (restart grace)\n", m, net[q].att)
#endif
	:: else ->
		tok_ = sCounter + 1;
		if :: tok_ < stime * K -> tok_ = stime * K :: else -> skip fi;
#ifndef NOCHECK_C
		assert(tok_ > lastTok); /* (c) tokens strictly increase */
#endif
		lastTok = tok_; sCounter = tok_;
		sAtt = net[q].att; sOwner = owner[m]; sMgr = m; sTok = tok_; sExp = stime + TTL; tok_ = 0;
#ifdef HANDOFF
		sPick = false; deq_ = net[q].att; dequeue();
#endif
		unowned = 0;
		net[q].res = R_OK; net[q].rtok = sTok;
		trace("store: acquire M%d attempt %d granted token %d until %d\n", m, sAtt, sTok, sExp)
	fi
}

/* storeRenew: Backend.Renew names the holding (attempt and token). */
inline storeRenew(m, q) {
	if
	:: live && sAtt == net[q].att && sTok == net[q].tok ->
		sExp = stime + TTL; net[q].res = R_OK; unowned = 0;
		trace("store: renew M%d token %d until %d\n", m, sTok, sExp)
	:: else ->
		net[q].res = R_NOTHELD;
		trace("store: renew M%d token %d: not held\n", m, net[q].tok)
	fi
}

/* storeRelease: Backend.Release names the holding (attempt, and token unless
   0); RELBYOWNER: the old contract, by owner. Nil either way. */
inline storeRelease(m, q) {
	if
#ifdef RELBYOWNER
	:: sAtt != 0 && sOwner == owner[m] && (net[q].tok == 0 || net[q].tok == sTok) ->
#else
	:: sAtt != 0 && sAtt == net[q].att && (net[q].tok == 0 || net[q].tok == sTok) ->
#endif
		trace("store: release M%d attempt %d token %d deletes token %d\n", m, net[q].att, net[q].tok, sTok);
		if :: m == 0 && sMgr == 0 -> released0 = true :: else -> skip fi;
		sAtt = 0;
#ifdef HANDOFF
		sPick = false;
		handOff();
#endif
	:: else ->
#ifdef HANDOFF
		deq_ = net[q].att; dequeue();
#endif
		trace("store: release M%d attempt %d token %d: nothing to do\n", m, net[q].att, net[q].tok)
	fi;
	net[q].res = R_OK
}

/* restart: the store comes back without data. The clock (and so the time
   part of new tokens) survives; the counter and the holding do not. */
inline restart() {
	sAtt = 0; sCounter = 0; restarts++;
#ifdef HANDOFF
	qLen = 0; qAtt[0] = 0; qAtt[1] = 0; qAtt[2] = 0; qMgr[0] = 0; qMgr[1] = 0; qMgr[2] = 0; sPick = false;
#endif
#ifndef NOGRACE
	sGraceUntil = stime + TTL;
#endif
	trace("store: RESTART without data\n")
}

/* ---------------- the environment ---------------- */

/* owned: some Manager holds the store's holding or is still acquiring it. */
#define ownedBy(m) ((phase[m] == HELD && now < deadline[m] && att[m] == sAtt) || (phase[m] == ACQ && att[m] == sAtt && !dead[m]))
#if NM == 3
#define owned (ownedBy(0) || ownedBy(1) || ownedBy(2))
#else
#define owned (ownedBy(0) || ownedBy(1))
#endif

/* tick: the clock advances one tick; (d) is counted here. */
inline tick() {
	now++;
	if
	:: live && !owned -> unowned++
	:: else -> unowned = 0
	fi;
	/* (d) nothing is left unowned longer than the TTL (+ the drift) */
	assert(unowned <= TTL + DRIFT)
}

/* freeSlot forgets everything about slot sl (no stale state). */
inline freeSlot(sl) {
	net[sl].stage = FREE; net[sl].kind = 0; net[sl].awaited = false; net[sl].att = 0;
	net[sl].tok = 0; net[sl].res = 0; net[sl].rtok = 0
}

inline deliver(sl) {
	if
	:: net[sl].kind == ACQUIRE -> storeAcquire(sl / NSLOT, sl)
	:: net[sl].kind == RENEW -> storeRenew(sl / NSLOT, sl)
	:: net[sl].kind == RELEASE -> storeRelease(sl / NSLOT, sl)
	fi;
	/* an answer nobody awaits any more is dropped on arrival */
	if
	:: net[sl].awaited -> net[sl].stage = REP
	:: else -> freeSlot(sl)
	fi
}

inline loseMsg(sl) {
	faults++;
	trace("net: M%d's %e (attempt %d token %d) lost\n", sl / NSLOT, net[sl].kind, net[sl].att, net[sl].tok);
	freeSlot(sl)
}

active proctype Env() {
end:	do
	:: atomic { now < TMAX -> tick() }
	:: atomic { skew < DRIFT -> skew++; trace("store clock gains a tick\n") }
	:: atomic { restarts < MAXRESTART -> restart() }
	/* deliver a request to the store, or lose a request or an answer */
	:: atomic { net[0].stage == REQ -> deliver(0) }
	:: atomic { net[1].stage == REQ -> deliver(1) }
	:: atomic { net[2].stage == REQ -> deliver(2) }
	:: atomic { net[3].stage == REQ -> deliver(3) }
#if NM == 3
	:: atomic { net[4].stage == REQ -> deliver(4) }
	:: atomic { net[5].stage == REQ -> deliver(5) }
#endif
	:: atomic { net[0].stage != FREE && faults < MAXFAULT -> loseMsg(0) }
	:: atomic { net[1].stage != FREE && faults < MAXFAULT -> loseMsg(1) }
	:: atomic { net[2].stage != FREE && faults < MAXFAULT -> loseMsg(2) }
	:: atomic { net[3].stage != FREE && faults < MAXFAULT -> loseMsg(3) }
#if NM == 3
	:: atomic { net[4].stage != FREE && faults < MAXFAULT -> loseMsg(4) }
	:: atomic { net[5].stage != FREE && faults < MAXFAULT -> loseMsg(5) }
#endif
	od
}

/* ---------------- the lease actor ---------------- */

/* unawait: the Manager stops awaiting its call (the Seq moves on); an
   answer already there is dropped, a request still in the network may yet
   be applied. */
inline unawait(m) {
	if :: net[m * NSLOT].stage == REP -> freeSlot(m * NSLOT) :: else -> net[m * NSLOT].awaited = false fi;
	if :: net[m * NSLOT + 1].stage == REP -> freeSlot(m * NSLOT + 1) :: else -> net[m * NSLOT + 1].awaited = false fi
}

/* send puts a request in a free slot of Manager m with a fresh Seq. */
inline send(m, k, a, t) {
	unawait(m);
	waiting[m] = true;
	if
	:: net[m * NSLOT].stage == FREE -> slot_ = m * NSLOT
	:: else -> slot_ = m * NSLOT + 1
	fi;
	assert(net[slot_].stage == FREE);
	net[slot_].stage = REQ; net[slot_].kind = k; net[slot_].awaited = true;
	net[slot_].att = a; net[slot_].tok = t; net[slot_].res = 0; net[slot_].rtok = 0;
	slot_ = 0
}

#define slotFree(m) (net[m * NSLOT].stage == FREE || net[m * NSLOT + 1].stage == FREE)

/* startRelease: release (attempt, token) detached; token 0 means whatever
   holding the attempt made. */
/* forget clears the attempt and holding (the model keeps no stale state). */
inline forget(m) {
	att[m] = 0; tok[m] = 0; deadline[m] = 0; acqSent[m] = 0; renewSent[m] = 0; renewing[m] = false
}

inline startRelease(m, a, t) {
	relAtt[m] = a; relTok[m] = t; relLive[m] = now + TTL + DRIFT;
	forget(m); phase[m] = REL;
	trace("M%d: release attempt %d token %d\n", m, relAtt[m], relTok[m]);
	send(m, RELEASE, relAtt[m], relTok[m])
}

/* startNext: a new acquire attempt with its own attempt id (an unconfirmed
   release is retried first while its holding may still be live). */
inline startNext(m) {
	if
	:: relAtt[m] != 0 && now < relLive[m] ->
		trace("M%d: retry the unconfirmed release first\n", m);
		phase[m] = REL; send(m, RELEASE, relAtt[m], relTok[m])
	:: else ->
		relAtt[m] = 0; relTok[m] = 0; relLive[m] = 0;
		phase[m] = ACQ; acqSent[m] = now;
#ifdef LIVE
		/* the liveness run polls for ever: M1's attempt ids alternate (no
		   request outlives its attempt there, see PREMATURE) */
		if
		:: m == 1 -> att[m] = 10
		:: else -> att[m] = nextAtt; nextAtt++; nAcq[m]++
		fi;
#else
		att[m] = nextAtt; nextAtt++; nAcq[m]++;
#endif
		trace("M%d: acquire attempt %d\n", m, att[m]);
		send(m, ACQUIRE, att[m], 0)
	fi
}

/* hold: a claimed grant becomes the holding. */
inline hold(m, t) {
	phase[m] = HELD; tok[m] = t; renewing[m] = false;
	deadline[m] = localDeadline(acqSent[m]); acqSent[m] = 0;
	if :: m == 1 -> acquired1 = true :: else -> skip fi;
	trace("M%d: HOLDS token %d, local deadline %d\n", m, t, deadline[m])
}

/* onAcquireResult: the answer (or an error) for the attempt in progress. */
inline onAcquireResult(m, r, t) {
	waiting[m] = false;
	if
	:: r == R_OK ->
		if
		:: closing[m] ->
			trace("M%d: granted token %d after Close\n", m, t);
			startRelease(m, att[m], t) /* releaseThenReply */
		:: localDeadline(acqSent[m]) <= now ->
			trace("M%d: grant token %d arrived after its local deadline\n", m, t);
			startRelease(m, att[m], t) /* releaseThenReply */
		:: GAVEUP(m) ->
			trace("M%d: caller gave up while token %d was on its way\n", m, t);
			startRelease(m, att[m], t) /* !Ticket.Claim() */
		:: !closing[m] && localDeadline(acqSent[m]) > now -> hold(m, t)
		fi
	:: r == R_BUSY ->
		trace("M%d: attempt %d not acquired\n", m, att[m]);
#ifdef HANDOFF
		/* queued at the store: poll (or wait for the notice) with the same attempt */
		if
		:: acqSent[m] = now; send(m, ACQUIRE, att[m], 0)
#if defined(LIVE) || defined(DEADWAITER)
		:: m == 2 -> dead[m] = true; trace("M2 dies (a dead contender, queued)\n")
#endif
#ifndef LIVE
		:: startRelease(m, att[m], 0) /* gave up: leave the queue */
#endif
		fi
#else
		forget(m); phase[m] = IDLE
#endif
	:: r == R_ERR ->
		/* ambiguous: the grant may have happened */
		if
		:: trace("M%d: acquire error; retry attempt %d\n", m, att[m]);
		   acqSent[m] = now; send(m, ACQUIRE, att[m], 0)
#ifndef LIVE
		:: trace("M%d: acquire error; give up, clean up attempt %d\n", m, att[m]);
		   startRelease(m, att[m], 0) /* releaseThenReply with token 0 */
#endif
		fi
	fi
}

/* startRenew: renew the holding (attempt and token). */
inline startRenew(m) {
	renewing[m] = true; renewSent[m] = now;
	trace("M%d: renew token %d\n", m, tok[m]);
	send(m, RENEW, att[m], tok[m])
}

/* onRenewResult: a confirmed renewal moves the local deadline. */
inline onRenewResult(m, r) {
	waiting[m] = false; renewing[m] = false;
	if
	:: r == R_OK ->
		deadline[m] = localDeadline(renewSent[m]); renewSent[m] = 0;
		trace("M%d: renewed token %d, local deadline %d\n", m, tok[m], deadline[m])
	:: r == R_NOTHELD -> lose(m)
	:: else -> renewSent[m] = 0; trace("M%d: renewal not confirmed\n", m)
	fi
}

/* lose: the holding is lost; release it in case the store still has it. */
inline lose(m) {
	trace("M%d: LOST token %d\n", m, tok[m]);
	startRelease(m, att[m], tok[m])
}

/* onReleaseResult: a confirmed release is done with; an unconfirmed one is
   retried before the next acquire. */
inline onReleaseResult(m, r) {
	waiting[m] = false;
	if
	:: r == R_OK -> relAtt[m] = 0; relTok[m] = 0; relLive[m] = 0
	:: else -> trace("M%d: release not confirmed\n", m)
	fi;
	phase[m] = IDLE
}

/* the answer awaited has arrived, or the call failed (an error: it may still
   be applied later, as a delayed request). */
#define answered(m, s) (net[s].stage == REP && net[s].awaited)


/* receive hands the answer in slot s to the decision awaiting it. */
inline receive(m, sl) {
	res_ = net[sl].res; rtok_ = net[sl].rtok; freeSlot(sl);
	if
	:: phase[m] == HELD && now >= deadline[m] -> lose(m)
	:: phase[m] == ACQ -> onAcquireResult(m, res_, rtok_)
	:: phase[m] == HELD && now < deadline[m] -> onRenewResult(m, res_)
	:: phase[m] == REL -> onReleaseResult(m, res_)
	fi;
	res_ = 0; rtok_ = 0
}

proctype Manager(byte m) {
end:	do
	/* onHoldTick: past the local deadline the holding is lost, first */
	:: atomic { phase[m] == HELD && now >= deadline[m] && slotFree(m) -> lose(m) }
	:: atomic { phase[m] == IDLE && !closing[m] && slotFree(m) &&
#ifdef LIVE
		(m == 1 || (m == 0 && nAcq[m] < 1) || (m == 2 && HAS_DEAD && nAcq[m] < 1 && phase[0] == HELD)) ->
#else
		nAcq[m] < MAXATT ->
#endif
		startNext(m) }
	:: atomic { phase[m] == IDLE && closing[m] && slotFree(m) && relAtt[m] != 0 && now < relLive[m] -> startNext(m) }
	:: atomic { phase[m] == IDLE && closing[m] && !(relAtt[m] != 0 && now < relLive[m]) -> phase[m] = CLOSED; trace("M%d: closed\n", m) }
	/* the answer to the request awaited; a late one (not the Seq awaited) is dropped */
	:: atomic { answered(m, m * NSLOT) -> receive(m, m * NSLOT) }
	:: atomic { answered(m, m * NSLOT + 1) -> receive(m, m * NSLOT + 1) }
	/* the call awaited fails: it was lost, or it timed out while the request
	   is still in the network (a fault: it may be applied later) */
	:: atomic {
		waiting[m] && slotFree(m) && (!inFlight(m) || PREMATURE) &&
		(phase[m] == ACQ || phase[m] == REL || (phase[m] == HELD && now < deadline[m])) ->
		if :: inFlight(m) -> faults++ :: else -> skip fi;
		trace("M%d: call failed (ambiguous)\n", m);
		unawait(m);
		if
		:: phase[m] == ACQ -> onAcquireResult(m, R_ERR, 0)
		:: phase[m] == HELD -> onRenewResult(m, R_ERR)
		:: phase[m] == REL -> onReleaseResult(m, R_ERR)
		fi
	   }
	/* while holding: renew, release */
	:: atomic { phase[m] == HELD && now < deadline[m] && !renewing[m] && slotFree(m) -> startRenew(m) }
	:: atomic { phase[m] == HELD && now < deadline[m] && slotFree(m) ->
		/* onRelease */
		trace("M%d: Release\n", m);
		startRelease(m, att[m], tok[m]) }
#if !defined(LIVE) && !defined(NOCLOSE)
	/* onShutdown (Manager.Close), by the last Manager */
	:: atomic { m == NM - 1 && !closing[m] && slotFree(m) ->
		closing[m] = true; trace("M%d: Close\n", m);
		if
		:: phase[m] == HELD && now < deadline[m] -> startRelease(m, att[m], tok[m])
		:: else -> skip
		fi }
#endif
	:: atomic { dead[m] -> break }
	od
}

#if NM == 3
#define twoHold ((holds(0) && holds(1)) || (holds(0) && holds(2)) || (holds(1) && holds(2)))
#define staleHolds ((holds(0) && tok[0] != lastTok) || (holds(1) && tok[1] != lastTok) || (holds(2) && tok[2] != lastTok))
#else
#define twoHold (holds(0) && holds(1))
#define staleHolds ((holds(0) && tok[0] != lastTok) || (holds(1) && tok[1] != lastTok))
#endif

/* The monitor: checked in every reachable state.
   (a) no two Managers hold the name with their local deadlines not passed;
   (b) a Manager that holds has the newest token ever granted, so a write it
       makes now passes a resource that refuses tokens lower than the highest
       it has seen only if it is the newest holding's. */
active proctype Safety() {
end:	do
	:: atomic { twoHold -> assert(!twoHold) }
	:: atomic { staleHolds -> assert(!staleHolds) }
	od
}

init {
	atomic {
		owner[0] = 1; owner[1] = 1;
		run Manager(0); run Manager(1);
#if NM == 3
		owner[2] = 2; run Manager(2)
#endif
	}
}

#ifdef LIVE
/* (e) a waiting Manager acquires once the holder has released */
ltl e { [] (released0 -> <> acquired1) }
#endif
