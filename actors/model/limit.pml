/*
 * limit.pml: one name acquired WithLimit(LIM), as the engine serves it (one
 * lease actor per holding: actors/limit.go) against a store that keeps the
 * rules of backend/limit.go (backend/memory/semaphore.go is one
 * implementation). Checked by limit_model_test.go. It is lease.pml's
 * abstraction, cut down to what the limit adds: lease.pml checks the
 * exclusive lease, its restarts, same-owner Managers and hand-off notices;
 * this model checks that LIM slots stay LIM.
 *
 * NM Managers (each with its own owner) make up to MAXATT acquire attempts
 * each (Manager 0 up to MAXATT0), one after another; a new attempt may start
 * while the release of the previous one is still on its way (each holding is
 * its own actor). The store
 * has LIM slots, one fencing counter, and the waiter queue: a refused attempt
 * is queued; a release of a live holding hands its slot to the head entry in
 * the same step, for PICKUP ticks, which that waiter picks up with its next
 * poll (an acquire of the same attempt, which refreshes the holding to the
 * TTL). A slot freed by expiry: while the name has a live holding, the next
 * acquire that finds it free hands it (and every other free one) in the same
 * step to the entries queued ahead of the caller, in order, each as a release
 * does, and the caller gets only a slot left over; with no live holding, a
 * free slot goes only to an attempt among the first (free slots) queued ones,
 * unless those let their turn (PICKUP ticks) pass. The network
 * delays, reorders and loses requests (MAXFAULT); a Manager may give up an
 * answer at any time (its call failed or its context ended), and then
 * releases what the attempt may have got, as the engine does. Hand-off
 * notices are left out (the waiter picks the slot up by polling), and so are
 * restarts.
 *
 * Time is discrete, every timer kept as ticks left or passed, so the clock
 * runs for ever in a finite state space. The store's clock may gain up to
 * DRIFT ticks on the Managers'; the safety margin is that drift.
 *
 * The properties (each assertion names its own):
 * (a) a_moreHolders: never more than LIM Managers hold the name with their
 *     local deadlines not passed;
 * (c) c_tokensIncrease: every new holding's token is above every earlier
 *     one's, whichever slot it takes.
 */

#define LIM 2
#define NM 3
#define QCAP 3
#define NSLOT 2       /* requests of one Manager that can be in the network */

hidden byte TTL;      /* the TTL, in ticks */
hidden byte PICKUP;   /* the pickup window (and a head's turn), in ticks */
hidden byte QTTL;     /* a queue entry's expiry, renewed by its waiter's polls */
hidden byte MAXATT;   /* acquire attempts per Manager (at most 2) */
hidden byte MAXATT0;  /* Manager 0's (at most 2): its second is the fourth attempt an acquire's hand-off of a freed slot needs */
hidden byte MAXFAULT; /* lost requests */
hidden byte DRIFT;    /* store ticks the store's clock may gain */
hidden int V;         /* the broken variant (bits), 0 for the design */

#define vNOLIMIT      ((V & 1) != 0) /* the store counts its slots one short: LIM+1 holdings */
#define vNOMARGIN     ((V & 2) != 0) /* safetyMargin = 0 */
#define vRECVDEADLINE ((V & 4) != 0) /* localDeadline from the receive time */
#define vSAMETOKEN    ((V & 8) != 0) /* a hand-off keeps the released holding's token */
#define vWALKTOKEN    ((V & 16) != 0) /* an acquire's hand-off of a free slot takes the counter's last token */

c_decl {
	static int lhcfg(const char *k, int d) { const char *v = getenv(k); return v && *v ? atoi(v) : d; }
}

#define MARGIN (vNOMARGIN -> 0 : DRIFT)
#define SLOTS (vNOLIMIT -> LIM + 1 : LIM)

/* ---- the store */
typedef Hold {
	unsigned att : 3;     /* the holding's attempt (0: a free slot) */
	byte tok;
	unsigned left : 2     /* store ticks until it expires */
};
Hold slot[LIM + 1];   /* the variant NOLIMIT uses the last one */
byte sCounter;
typedef Entry {
	unsigned att : 3;
	unsigned left : 2;    /* store ticks until the entry expires */
	bit turnOn;           /* its turn has begun (turnAt set) */
	unsigned turn : 2     /* store ticks since (saturates at PICKUP) */
};
Entry q[QCAP];
unsigned qLen : 2;
unsigned skew : 2;    /* ticks the store's clock has gained */

/* ---- ghosts and scratch */
byte lastTok;
hidden byte a_moreHolders, c_tokensIncrease;
hidden byte i_, j_, n_, f_, p_, t_, a_, k_, r_;

/* ---- the network */
#define FREE 0
#define REQ  1
#define REP  2
#define ACQUIRE 1
#define RENEW   2
#define RELEASE 3
#define R_OK      1
#define R_BUSY    2
#define R_NOTHELD 3
typedef Msg {
	unsigned stage : 2;
	unsigned kind : 2;
	bit awaited;
	unsigned att : 3;
	byte tok;
	unsigned res : 2;
	byte rtok
};
Msg net[NM * NSLOT];
unsigned faults : 2;

/* ---- one Manager's actor of its current attempt */
#define IDLE 0
#define ACQ  1
#define POLL 2
#define HELD 3
typedef Mgr {
	unsigned phase : 2;
	unsigned att : 3;
	byte tok;
	unsigned dl : 2;      /* ticks left until the local deadline (HELD) */
	unsigned age : 2;     /* ticks since the awaited request was sent */
	bit renewing;
	unsigned nAcq : 2
};
Mgr mg[NM];

#define holds(m) (mg[m].phase == HELD && mg[m].dl > 0)
#define localDeadline(m) (vRECVDEADLINE -> TTL - MARGIN : (mg[m].age < TTL - MARGIN -> TTL - MARGIN - mg[m].age : 0))
#define trace(...) printf(__VA_ARGS__)

/* checkHolders: (a) at most LIM holders. */
inline checkHolders() {
	n_ = 0;
	i_ = 0;
	do
	:: i_ < NM -> if :: holds(i_) -> n_++ :: else -> skip fi; i_++
	:: else -> break
	od;
	assert(a_moreHolders || n_ <= LIM)
}

/* newHolding puts attempt a in slot j with token t for n store ticks; (c)
   the token must be above every earlier one. */
inline newHolding(j, a, t, n) {
	if :: t <= lastTok -> trace("store: token %d is not above %d\n", t, lastTok) :: else -> skip fi;
	assert(c_tokensIncrease || t > lastTok);
	lastTok = t; slot[j].att = a; slot[j].tok = t; slot[j].left = n
}

inline dequeue(a) {
	i_ = 0;
	do
	:: i_ < qLen && q[i_].att != a -> i_++
	:: i_ < qLen && q[i_].att == a ->
		do
		:: i_ + 1 < qLen -> q[i_].att = q[i_ + 1].att; q[i_].left = q[i_ + 1].left;
			q[i_].turnOn = q[i_ + 1].turnOn; q[i_].turn = q[i_ + 1].turn; i_++
		:: else -> break
		od;
		qLen--; q[qLen].att = 0; q[qLen].left = 0; q[qLen].turnOn = 0; q[qLen].turn = 0;
		break
	:: i_ >= qLen -> break
	od
}

/* clearTurns: a grant was made; turns count from the next free slot. */
inline clearTurns() {
	i_ = 0;
	do
	:: i_ < qLen -> q[i_].turnOn = 0; q[i_].turn = 0; i_++
	:: else -> break
	od
}

inline enqueue(a) {
	i_ = 0;
	do
	:: i_ < qLen && q[i_].att != a -> i_++
	:: i_ < qLen && q[i_].att == a -> q[i_].left = QTTL; break
	:: i_ >= qLen ->
		if :: qLen < QCAP -> q[qLen].att = a; q[qLen].left = QTTL; q[qLen].turnOn = 0; q[qLen].turn = 0; qLen++ :: else -> skip fi;
		break
	od
}

/* find: j_ is the slot of attempt a (SLOTS if none); f_ the free slots. */
inline find(a) {
	j_ = SLOTS; f_ = 0; k_ = 0;
	do
	:: k_ < SLOTS -> if :: slot[k_].att == 0 -> f_++ :: slot[k_].att != 0 && slot[k_].att == a -> j_ = k_ :: else -> skip fi; k_++
	:: else -> break
	od
}

/* freeSlot: k_ is a free slot. */
inline freeSlot() {
	k_ = 0;
	do
	:: slot[k_].att != 0 -> k_++
	:: else -> break
	od
}

/* storeAcquire: acquireSemLocked, handFreeSemLocked and semTurnLocked. */
inline storeAcquire(s) {
	a_ = net[s].att;
	find(a_);
	if
	:: j_ < SLOTS -> /* the same attempt again: refresh, keep the token (a pickup too) */
		slot[j_].left = TTL; net[s].res = R_OK; net[s].rtok = slot[j_].tok;
		trace("store: attempt %d refreshes token %d\n", a_, slot[j_].tok)
	:: j_ == SLOTS && f_ == 0 ->
		net[s].res = R_BUSY; enqueue(a_);
		trace("store: attempt %d refused (full)\n", a_)
	:: j_ == SLOTS && f_ > 0 && f_ < SLOTS ->
		/* a live holding: the free slots go first to the entries ahead of
		   the caller, as a release hands one on, so that a waiter need not
		   find a slot freed by expiry by polling; the caller's own entry
		   stops the walk. (An entry of an attempt that holds, or of another
		   limit, which the store drops on the way, cannot arise here.) */
		do
		:: f_ > 0 && qLen > 0 && q[0].att != a_ ->
			n_ = q[0].att; dequeue(n_); freeSlot();
			if
			:: vWALKTOKEN -> newHolding(k_, n_, sCounter, PICKUP)
			:: else -> sCounter++; newHolding(k_, n_, sCounter, PICKUP)
			fi;
			f_--;
			trace("store: attempt %d hands a free slot to attempt %d token %d\n", a_, n_, slot[k_].tok)
		:: else -> break
		od;
		if
		:: f_ > 0 ->
			dequeue(a_); clearTurns(); freeSlot();
			sCounter++; newHolding(k_, a_, sCounter, TTL);
			net[s].res = R_OK; net[s].rtok = sCounter;
			trace("store: attempt %d granted token %d\n", a_, sCounter)
		:: else ->
			net[s].res = R_BUSY; enqueue(a_);
			trace("store: attempt %d refused (the free slots handed on)\n", a_)
		fi
	:: j_ == SLOTS && f_ == SLOTS ->
		/* no live holding: the first f_ entries have their turn; one whose
		   turn passed leaves */
		r_ = R_BUSY;
		do
		:: true ->
			p_ = 0;
			do
			:: p_ < qLen && q[p_].att != a_ -> p_++
			:: else -> break
			od;
			if
			:: p_ < f_ -> r_ = R_OK; break
			:: else ->
				t_ = QCAP; i_ = 0;
				do
				:: i_ < f_ && i_ < qLen ->
					if :: !q[i_].turnOn -> q[i_].turnOn = 1; q[i_].turn = 0 :: else -> skip fi;
					if :: q[i_].turn >= PICKUP && t_ == QCAP -> t_ = i_ :: else -> skip fi;
					i_++
				:: else -> break
				od;
				if
				:: t_ < QCAP -> trace("store: attempt %d let its turn pass\n", q[t_].att); n_ = q[t_].att; dequeue(n_)
				:: else -> break
				fi
			fi
		od;
		if
		:: r_ == R_OK ->
			dequeue(a_); clearTurns(); freeSlot();
			sCounter++; newHolding(k_, a_, sCounter, TTL);
			net[s].res = R_OK; net[s].rtok = sCounter;
			trace("store: attempt %d granted token %d\n", a_, sCounter)
		:: else ->
			net[s].res = R_BUSY; enqueue(a_);
			trace("store: attempt %d refused (a head's turn)\n", a_)
		fi
	fi
}

inline storeRenew(s) {
	a_ = net[s].att; find(a_);
	if
	:: j_ < SLOTS && slot[j_].tok == net[s].tok -> slot[j_].left = TTL; net[s].res = R_OK
	:: else -> net[s].res = R_NOTHELD
	fi
}

/* storeRelease: releaseSemLocked and handOnSemLocked: the freed slot goes to
   the head live entry in the same step, for PICKUP. A release that matches
   no holding takes the attempt out of the queue. */
inline storeRelease(s) {
	a_ = net[s].att;
	find(a_);
	if
	:: j_ < SLOTS && (net[s].tok == 0 || net[s].tok == slot[j_].tok) ->
		trace("store: release of attempt %d token %d\n", a_, slot[j_].tok);
		t_ = slot[j_].tok;
		slot[j_].att = 0; slot[j_].tok = 0; slot[j_].left = 0;
		dequeue(a_);
		if
		:: qLen > 0 ->
			n_ = q[0].att; dequeue(n_); clearTurns();
			if
			:: vSAMETOKEN -> newHolding(j_, n_, t_, PICKUP)
			:: else -> sCounter++; newHolding(j_, n_, sCounter, PICKUP)
			fi;
			trace("store: hand-off to attempt %d token %d\n", n_, slot[j_].tok)
		:: else -> skip
		fi
	:: else -> dequeue(a_)
	fi;
	net[s].res = R_OK
}

/* ---- the Managers */

/* send: a request of Manager m in a free slot of its own; a release that
   finds none is lost (as a lost message: the store's expiry covers it). */
inline send(sm, sk, sa, st, sw) {
	i_ = sm * NSLOT;
	do
	:: i_ < sm * NSLOT + NSLOT && net[i_].stage != FREE -> i_++
	:: i_ < sm * NSLOT + NSLOT && net[i_].stage == FREE ->
		net[i_].stage = REQ; net[i_].kind = sk; net[i_].att = sa; net[i_].tok = st; net[i_].awaited = sw;
		net[i_].res = 0; net[i_].rtok = 0; break
	:: i_ >= sm * NSLOT + NSLOT -> break
	od
}

/* a free slot for Manager m's next awaited request */
#define canSend(m) (net[m * NSLOT].stage == FREE || net[m * NSLOT + 1].stage == FREE)

/* forget: Manager m no longer awaits any answer (its call failed, or its
   holding ended). */
inline forget(m) {
	i_ = m * NSLOT;
	do
	:: i_ < m * NSLOT + NSLOT -> net[i_].awaited = false; if :: net[i_].stage == REP -> net[i_].stage = FREE :: else -> skip fi; i_++
	:: else -> break
	od
}

inline endHolding(m) {
	forget(m);
	send(m, RELEASE, mg[m].att, mg[m].tok, false);
	mg[m].phase = IDLE; mg[m].renewing = false; mg[m].dl = 0; mg[m].tok = 0; mg[m].age = 0
}

#define answered(s) (net[s].stage == REP && net[s].awaited)

proctype manager(byte m) {
	byte s;
	do
	/* a new attempt: a new lease actor */
	:: atomic { mg[m].phase == IDLE && mg[m].nAcq < (m == 0 -> MAXATT0 : MAXATT) && canSend(m) ->
		mg[m].nAcq++; mg[m].att = m * 2 + mg[m].nAcq; mg[m].age = 0; mg[m].phase = ACQ;
		send(m, ACQUIRE, mg[m].att, 0, true);
		trace("M%d: acquire as attempt %d\n", m, mg[m].att) }
	/* a poll: the same attempt again */
	:: atomic { mg[m].phase == POLL && canSend(m) ->
		mg[m].age = 0; mg[m].phase = ACQ; send(m, ACQUIRE, mg[m].att, 0, true) }
	/* the waiter gives up: it leaves the queue (Release(attempt, 0)) */
	:: atomic { mg[m].phase == POLL && faults < MAXFAULT ->
		faults++; send(m, RELEASE, mg[m].att, 0, false); mg[m].phase = IDLE;
		trace("M%d: attempt %d gives up\n", m, mg[m].att) }
	/* the acquire's call fails or its caller gives up: release what it may have got */
	:: atomic { mg[m].phase == ACQ && faults < MAXFAULT ->
		faults++; forget(m); send(m, RELEASE, mg[m].att, 0, false); mg[m].phase = IDLE; mg[m].age = 0;
		trace("M%d: attempt %d's acquire failed\n", m, mg[m].att) }
	:: atomic { mg[m].phase == HELD && !mg[m].renewing && canSend(m) ->
		mg[m].age = 0; mg[m].renewing = true; send(m, RENEW, mg[m].att, mg[m].tok, true) }
	:: atomic { mg[m].phase == HELD && mg[m].renewing && faults < MAXFAULT -> faults++; forget(m); mg[m].renewing = false; mg[m].age = 0 } /* unconfirmed */
	:: atomic { mg[m].phase == HELD ->
		trace("M%d: releases token %d\n", m, mg[m].tok); endHolding(m) }
	:: atomic { mg[m].phase == HELD && mg[m].dl == 0 ->
		trace("M%d: token %d lost at its deadline\n", m, mg[m].tok); endHolding(m) }
	/* an answer */
	:: atomic { answered(m * NSLOT) || answered(m * NSLOT + 1) ->
		if :: answered(m * NSLOT) -> s = m * NSLOT :: else -> s = m * NSLOT + 1 fi;
		net[s].stage = FREE; net[s].awaited = false;
		if
		:: net[s].kind == ACQUIRE && net[s].res == R_OK ->
			if
			:: localDeadline(m) > 0 ->
				mg[m].phase = HELD; mg[m].tok = net[s].rtok; mg[m].dl = localDeadline(m); mg[m].age = 0;
				trace("M%d: holds token %d for %d ticks\n", m, mg[m].tok, mg[m].dl);
				checkHolders()
			:: else -> /* too late: ErrTTLTooShort, released */
				send(m, RELEASE, mg[m].att, net[s].rtok, false); mg[m].phase = IDLE; mg[m].age = 0
			fi
		:: net[s].kind == ACQUIRE && net[s].res == R_BUSY -> mg[m].phase = POLL; mg[m].age = 0
		:: net[s].kind == RENEW && net[s].res == R_OK ->
			mg[m].renewing = false;
			if :: localDeadline(m) > mg[m].dl -> mg[m].dl = localDeadline(m) :: else -> skip fi;
			mg[m].age = 0;
			checkHolders()
		:: net[s].kind == RENEW && net[s].res == R_NOTHELD ->
			trace("M%d: token %d rejected\n", m, mg[m].tok);
			mg[m].phase = IDLE; mg[m].renewing = false; mg[m].dl = 0; mg[m].age = 0
		fi }
	od
}

/* ---- the store and the network */
#define requested (net[0].stage == REQ || net[1].stage == REQ || net[2].stage == REQ || net[3].stage == REQ || net[4].stage == REQ || net[5].stage == REQ)

/* pick: s is a request on its way, any of them (the network reorders). */
inline pick() {
	if
	:: net[0].stage == REQ -> s = 0
	:: net[1].stage == REQ -> s = 1
	:: net[2].stage == REQ -> s = 2
	:: net[3].stage == REQ -> s = 3
	:: net[4].stage == REQ -> s = 4
	:: net[5].stage == REQ -> s = 5
	fi
}

proctype store() {
	byte s;
	do
	:: atomic { requested ->
		pick();
		if
		:: net[s].kind == ACQUIRE -> storeAcquire(s)
		:: net[s].kind == RENEW -> storeRenew(s)
		:: net[s].kind == RELEASE -> storeRelease(s)
		fi;
		if :: net[s].awaited -> net[s].stage = REP :: else -> net[s].stage = FREE fi;
		checkHolders() }
	/* a request lost on its way */
	:: atomic { faults < MAXFAULT && requested ->
		pick(); faults++; net[s].stage = FREE; trace("net: a request lost\n") }
	od
}

/* storeTick: the slots, the queue entries and the turns run down. */
inline storeTick() {
	k_ = 0;
	do
	:: k_ < SLOTS ->
		if
		:: slot[k_].left > 1 -> slot[k_].left--
		:: slot[k_].left == 1 -> trace("store: token %d expires\n", slot[k_].tok); slot[k_].att = 0; slot[k_].tok = 0; slot[k_].left = 0
		:: else -> skip
		fi; k_++
	:: else -> break
	od;
	p_ = 0;
	do
	:: p_ < qLen && q[p_].left > 1 -> q[p_].left--; if :: q[p_].turnOn && q[p_].turn < PICKUP -> q[p_].turn++ :: else -> skip fi; p_++
	:: p_ < qLen && q[p_].left <= 1 -> n_ = q[p_].att; dequeue(n_)
	:: p_ >= qLen -> break
	od
}

/* mgrTick: the Managers' clock: deadlines run down, requests age. */
inline mgrTick() {
	p_ = 0;
	do
	:: p_ < NM ->
		/* only an awaited request's age matters (localDeadline) */
		if :: (mg[p_].phase == ACQ || mg[p_].renewing) && mg[p_].age < 3 -> mg[p_].age++ :: else -> skip fi;
		if :: mg[p_].phase == HELD && mg[p_].dl > 0 -> mg[p_].dl-- :: else -> skip fi;
		p_++
	:: else -> break
	od
}

proctype clock() {
	do
	:: atomic { storeTick(); mgrTick(); checkHolders() }
	:: atomic { skew < DRIFT -> skew++; storeTick(); checkHolders() }
	:: atomic { skew > 0 -> skew--; mgrTick(); checkHolders() }
	od
}

init {
	atomic {
		c_code {
			TTL = lhcfg("LH_TTL", 2); PICKUP = lhcfg("LH_PICKUP", 1); QTTL = lhcfg("LH_QTTL", 3);
			MAXATT = lhcfg("LH_MAXATT", 1); MAXATT0 = lhcfg("LH_MAXATT0", MAXATT); MAXFAULT = lhcfg("LH_MAXFAULT", 0);
			DRIFT = lhcfg("LH_DRIFT", 1); V = lhcfg("LH_V", 0);
		};
		run store(); run clock();
		run manager(0); run manager(1); run manager(2)
	}
}
