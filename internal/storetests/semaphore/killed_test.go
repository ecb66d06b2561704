package semaphore_test

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/poll"
	goredis "github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/storetests/localstore"
)

// The workload: procs child processes of workers goroutines each, all on one
// name of limit n; the parent process only coordinates and checks.
const (
	procs   = 4
	workers = 4
	limit   = 3
	ttl     = 2 * time.Second // a killed holder's slots free within the run
	// From killAfter on the victim holds, and never gives back, every grant
	// it gets; it is killed once it holds one (and, when it waits, once it
	// also has a waiter in the store's queue). The run ends runFor after the
	// start at the earliest, once the survivors have taken over its slots.
	killAfter = 2 * time.Second
	runFor    = 7 * time.Second
	victim    = 0
	// Holds and pauses, drawn at random in [min, max).
	holdMin, holdMax   = 2 * time.Millisecond, 40 * time.Millisecond
	pauseMin, pauseMax = 1 * time.Millisecond, 20 * time.Millisecond
	// minGrants is the least progress the run must show.
	minGrants = 100
)

// mode is what a run's children do.
type mode struct {
	name string
	// wait: every Acquire waits (WithWait(WaitForever)), so that the
	// workers queue on the store and are granted by hand-offs.
	wait   bool
	ttl    time.Duration
	pickup time.Duration // the children's pickup window (wait only)
	// takeover: the survivors must hold all slots at once after the kill.
	takeover bool
	// store is where the slots are held: "" for the local Redis, "mysql"
	// for the local MariaDB, in the database schema (set by the run).
	store, schema string
}

var (
	// One attempt per Acquire.
	single = mode{name: "single", ttl: ttl, takeover: true}
	// Waiting Acquires: the TTL is long enough, and the pickup window
	// (its largest, a quarter of it) wide enough, that a loaded machine
	// still picks its hand-offs up and renews them in time.
	queued = mode{name: "queued", wait: true, ttl: 4 * time.Second, pickup: time.Second, takeover: true}
	// single on MariaDB.
	singleMySQL = mode{name: "single-mysql", ttl: ttl, takeover: true, store: "mysql"}
)

func modeNamed(name string) (mode, bool) {
	for _, m := range []mode{single, queued, singleMySQL} {
		if m.name == name {
			return m, true
		}
	}
	return mode{}, false
}

// patience bounds every wait for something that must happen: generous, so
// that a loaded machine does not fail the test, and finite, so that a broken
// one fails rather than hangs.
const patience = 15 * time.Second

// The environment of a child (TestSemaphoreChild).
const (
	childName = "LEASEHOLD_SEMAPHORE_CHILD_NAME"
	childAddr = "LEASEHOLD_SEMAPHORE_CHILD_REDIS"
	childProc = "LEASEHOLD_SEMAPHORE_CHILD_PROC"
	childMode = "LEASEHOLD_SEMAPHORE_CHILD_MODE"
	// childSchema is the MariaDB database of a run on MySQL.
	childSchema = "LEASEHOLD_SEMAPHORE_CHILD_SCHEMA"
)

// owner is the Manager owner of process proc.
func owner(proc int) string { return "process-" + strconv.Itoa(proc) }

// holding is one grant as its process reported it. Every time is wall-clock
// nanoseconds (time.Now().UnixNano()): all the processes run on this
// machine, so their wall clocks are one clock and the times compare.
type holding struct {
	proc, worker int
	token        uint64
	call         int64 // Acquire called
	granted      int64 // Acquire returned the lease
	deadline     int64 // the handle's local deadline, as it reported it at the grant
	ended        int64 // Release called or the loss seen; 0: never reported
	released     int64 // Release returned; 0: never reported
	how          string
}

// end is when the holder stopped believing it holds, conservatively: the
// earlier of its Release call (or of the moment it saw the loss) and its
// local deadline; for a holding whose end was never reported (its process
// was killed), the local deadline.
func (h holding) end() int64 {
	if h.ended != 0 {
		return min(h.ended, h.deadline)
	}
	return h.deadline
}

// 4 processes × 4 goroutines take and give back holdings of one name of
// limit 3 on the local Redis, with random holds and pauses; one process is
// SIGKILLed while it holds. A checker fed every holding of every process
// finds at no instant more than 3 holders believing they hold (each from
// Acquire's return to the earlier of its Release call and its local
// deadline), every token distinct and above every token granted before its
// Acquire was called, the killed process's slots taken over after its
// holdings' local deadlines, and enough grants.
//
// Each Acquire is one attempt, WithoutAutoRenew: a holding's local deadline
// is then fixed at the grant, and the grant report carries it, so that the
// checker knows it after the kill.
func TestSemaphoreAcrossKilledProcess(t *testing.T) { runKilled(t, single) }

// The same workload and checks on MariaDB (or MySQL): the children hold
// their slots in its tables.
func TestSemaphoreAcrossKilledProcessMySQL(t *testing.T) { runKilled(t, singleMySQL) }

// The same workload and checks, but every Acquire waits: the workers stand
// in the store's queue and are granted by the hand-offs of the releases, of
// their own process and of the others. The victim is killed while it holds
// and has a waiter in the store's queue (read from the store just before the
// kill), so that the queue holds a dead process's entries. Beyond the checks
// above: enough grants were hand-offs (their tokens published on the
// store's hand-off channels, watched by the parent), each to the process
// that was granted it; enough were handed on by another process's release
// (the parent samples the name's token counter, which bounds when each
// hand-off was made, and no release of the grantee's own process overlaps
// that); and the surviving processes' leasehold.handoffs counters show
// grants by notice.
//
// A hand-off is held for its pickup window, then renewed to the TTL after
// the grant; each worker renews at once, WithoutAutoRenew, and reports the
// deadline that renewal gave, which no later renewal moves.
func TestSemaphoreHandOffAcrossKilledProcess(t *testing.T) { runKilled(t, queued) }

func runKilled(t *testing.T, md mode) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	name := fmt.Sprintf("semaphore-%s-%d", md.name, time.Now().UnixNano())
	if md.store == "mysql" {
		// The database of the children's tables, created here once.
		md.schema = fmt.Sprintf("lh_semaphore_%d", time.Now().UnixNano())
		_ = localstore.MySQL(t, md.schema) // skips, or fails, without the local MariaDB
		t.Cleanup(func() { _, _ = localstore.MySQLDB(t).Exec("DROP DATABASE `" + md.schema + "`") })
	} else {
		_ = localstore.Redis(t) // skips, or fails, without the local Redis
	}
	r := &records{changed: make(chan struct{}, 1), holdings: map[key]*holding{}}
	var rc *goredis.Client
	var stream *handOffStream
	var samples *tokenSampler
	if md.wait {
		rc = goredis.NewClient(&goredis.Options{Addr: localstore.RedisAddr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rc.Close() })
		stream = watchHandOffs(t, rc, name) // before any child starts
		samples = sampleTokens(t, rc, name)
	}
	var killed time.Time
	t.Cleanup(func() { dumpOnFailure(t, r, stream, killed) }) // after the children's clean-up
	kids := make([]*kid, procs)
	for i := range kids {
		kids[i] = startChild(t, r, name, i, md)
	}
	r.await(t, "every child ready", func() bool {
		for _, ok := range r.ready {
			if !ok {
				return false
			}
		}
		return true
	})
	start := time.Now()
	for _, k := range kids {
		if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}

	// From killAfter on, the victim keeps what it is granted: a holding it
	// reports from then on is still held at the kill, whenever that comes.
	<-time.After(killAfter)
	if _, err := io.WriteString(kids[victim].stdin, "hold\n"); err != nil {
		t.Fatal(err)
	}
	r.await(t, "a grant the victim keeps", func() bool { return r.kept[victim] > 0 })
	if md.wait {
		// Its other workers wait meanwhile (three slots, four workers):
		// one of them in the store's queue, as the store says.
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		poll.Until(t, "a waiter of the victim in the store's queue", patience, func() bool {
			ok, err := queuedIn(ctx, rc, name, owner(victim))
			if err != nil {
				t.Fatalf("reading the store's queue: %v", err)
			}
			return ok
		})
	}
	if err := kids[victim].cmd.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	await(t, "the victim's output ending", kids[victim].read)
	killed = time.Now() // the victim is dead: its stdout reached EOF
	if err := await(t, "the victim's exit", kids[victim].waited); err == nil {
		t.Fatal("the victim exited cleanly: it was not killed")
	}

	// The run goes on until runFor, and then until there are enough grants
	// and, when asked, the survivors have held all slots at once after the
	// kill (among the holdings already ended: their intervals are final).
	<-time.After(time.Until(start.Add(runFor)))
	r.await(t, "enough grants, and the survivors taking over the victim's slots", func() bool {
		if !md.takeover {
			return len(r.all) >= minGrants
		}
		var ended []holding
		for _, h := range r.all {
			if h.proc != victim && h.ended != 0 {
				ended = append(ended, *h)
			}
		}
		_, ok := fullAfter(ended, killed.UnixNano())
		return ok && len(r.all) >= minGrants
	})
	stopping := time.Now() // waiters leave from here on, and may hand on what they were handed
	for i, k := range kids {
		if i != victim {
			k.stdin.Close() // the child's signal to stop
		}
	}
	for i, k := range kids {
		if i == victim {
			continue
		}
		if err := await(t, fmt.Sprintf("child %d's exit", i), k.waited); err != nil {
			r.mu.Lock()
			t.Errorf("child %d: %v; its output:\n%s", i, err, strings.Join(r.other[i], "\n"))
			r.mu.Unlock()
		}
	}
	var handedTo map[uint64]int
	var tokens []tokenSample
	if stream != nil {
		handedTo = stream.drain(t, rc)
		tokens = samples.stop()
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.fails {
		t.Error(f)
	}
	hs := make([]holding, 0, len(r.all))
	for _, h := range r.all {
		hs = append(hs, *h)
	}
	res := check(hs, killed.UnixNano(), md.takeover)
	for _, p := range res.problems {
		t.Error(p)
	}
	if res.tookOver {
		t.Logf("%d grants in %v; the victim held %d when killed; its slots taken over %v after the kill (TTL %v), %v after its last local deadline",
			len(hs), time.Since(start).Round(time.Millisecond), res.victimHeld, res.takeover.Round(time.Millisecond), md.ttl, res.margin.Round(time.Millisecond))
	} else {
		t.Logf("%d grants in %v; the victim held %d when killed; the survivors never held all %d slots at once after the kill",
			len(hs), time.Since(start).Round(time.Millisecond), res.victimHeld, limit)
	}
	if !md.wait {
		return
	}
	var notices, polls int64
	for i := range procs {
		if i == victim {
			continue
		}
		if !r.counted[i] {
			t.Errorf("process %d: no report of its hand-off counters", i)
		}
		notices += r.handOffs[i][0]
		polls += r.handOffs[i][1]
	}
	ho := checkHandOffs(hs, handedTo, tokens, notices, stopping.UnixNano())
	for _, p := range ho.problems {
		t.Error(p)
	}
	t.Logf("%d hand-offs published, %d of them granted, %d across processes; %d to the dead victim, never taken, %d of them by a survivor's release; %d samples of the token; the survivors' counters: %d by notice, %d by poll",
		len(handedTo), ho.granted, ho.across, ho.toDead, ho.deadAcross, len(tokens), notices, polls)
}

// Hand-off evidence the checker needs at the least: grants by hand-off, and
// hand-offs across processes. (A run has hundreds of each.)
const (
	minHandOffs = minGrants / 2
	minAcross   = minHandOffs / 5
)

// handOffResult is what checkHandOffs found.
type handOffResult struct {
	problems []string
	granted  int // grants whose token a release handed on
	across   int // of them, handed on by another process's release
	toDead   int // hand-offs to the victim never reported granted
	// Of toDead, those handed on by a survivor's release.
	deadAcross int
}

// tokenSample is the name's fence counter (the highest token issued) read
// from the store: between sent and got, the store's counter was token.
type tokenSample struct {
	sent, got int64
	token     uint64
}

// issued bounds when token tok was issued, from samples (in order): after
// the last read that found a lower counter was sent, before the first read
// that found it or a higher one came back.
func issued(samples []tokenSample, tok uint64) (after, before int64) {
	i := sort.Search(len(samples), func(i int) bool { return samples[i].token >= tok })
	after, before = math.MinInt64, math.MaxInt64
	if i > 0 {
		after = samples[i-1].sent
	}
	if i < len(samples) {
		before = samples[i].got
	}
	return after, before
}

// checkHandOffs checks the grants hs against the hand-offs the store
// published, handedTo (token: the process it was handed to), the samples
// of the name's token counter, and the surviving processes' count of
// grants they learned of by notice; from stopping on, waiters leave (and a
// leaving waiter releases what it was handed meanwhile).
//
// A hand-off is made by a release (or by an acquire that finds a slot freed
// by expiry), in the store, within the bounds the samples give for its
// token's issue, and, for a granted one, after its grantee's Acquire call
// and before its grant. A process releases only
// from its Release call (or its holding's loss) to Release's return, or
// from its holding's local deadline on (a loss the engine releases); when
// none of the grantee's process overlaps the bounds, the release that
// handed it on was another process's.
func checkHandOffs(hs []holding, handedTo map[uint64]int, samples []tokenSample, notices, stopping int64) handOffResult {
	var res handOffResult
	fail := func(format string, args ...any) {
		if len(res.problems) < 20 {
			res.problems = append(res.problems, fmt.Sprintf(format, args...))
		}
	}
	byProc := map[int][]holding{}
	byToken := map[uint64]holding{}
	for _, h := range hs {
		byProc[h.proc] = append(byProc[h.proc], h)
		byToken[h.token] = h
	}
	// ownRelease: a release of process p's, but of the holding tok, may
	// have run in the store within (from, to).
	ownRelease := func(p int, tok uint64, from, to int64) bool {
		for _, h := range byProc[p] {
			start, end := h.end(), int64(math.MaxInt64)
			if h.how == "released" && h.released != 0 {
				end = h.released
			}
			if h.token != tok && start < to && end > from {
				return true
			}
		}
		return false
	}
	for tok, p := range handedTo {
		from, to := issued(samples, tok)
		g, granted := byToken[tok]
		switch {
		case !granted:
			if p == victim {
				res.toDead++
				if to < stopping && !ownRelease(victim, tok, from, to) {
					res.deadAcross++
				}
			}
		case p != g.proc:
			fail("token %d: handed off to process %d, granted to process %d", tok, p, g.proc)
		default:
			res.granted++
			from, to = max(from, g.call), min(to, g.granted)
			if g.granted < stopping && !ownRelease(p, tok, from, to) {
				res.across++
			}
		}
	}
	if res.granted < minHandOffs {
		fail("only %d grants by hand-off: fewer than %d", res.granted, minHandOffs)
	}
	if res.across+res.deadAcross < minAcross {
		fail("only %d hand-offs across processes: fewer than %d", res.across+res.deadAcross, minAcross)
	}
	if notices == 0 {
		fail("no grant learned of by a hand-off notice")
	}
	return res
}

// result is what check found.
type result struct {
	problems   []string
	victimHeld int           // the victim's holdings never ended by their holder
	tookOver   bool          // the survivors held all limit slots at once after the kill
	takeover   time.Duration // from the kill to the survivors holding all limit slots
	margin     time.Duration // from the victim's last local deadline to the takeover
}

// check is the independent checker: it knows nothing but the holdings and
// when the victim was dead; takeover: the survivors must have held all
// slots at once after the kill.
func check(hs []holding, killed int64, takeover bool) result {
	var res result
	fail := func(format string, args ...any) {
		if len(res.problems) < 20 {
			res.problems = append(res.problems, fmt.Sprintf(format, args...))
		}
	}
	if len(hs) < minGrants {
		fail("only %d grants: fewer than %d", len(hs), minGrants)
	}

	// Every token distinct.
	seen := map[uint64]holding{}
	for _, h := range hs {
		if o, ok := seen[h.token]; ok {
			fail("token %d granted twice: to process %d worker %d and to process %d worker %d", h.token, o.proc, o.worker, h.proc, h.worker)
		}
		seen[h.token] = h
		if h.ended == 0 && h.proc != victim {
			fail("process %d worker %d: token %d never ended", h.proc, h.worker, h.token)
		}
		// (One given back unrenewed may have been taken past its pickup
		// window's deadline by a holder slow to return: it acted on nothing.)
		if h.deadline < h.granted && h.how != "unrenewed" {
			fail("process %d worker %d: token %d granted after its own local deadline", h.proc, h.worker, h.token)
		}
	}

	// Each grant's token above every token granted before its Acquire was
	// called.
	byGrant := append([]holding(nil), hs...)
	slices.SortFunc(byGrant, func(a, b holding) int { return cmp.Compare(a.granted, b.granted) })
	maxUpTo := make([]uint64, len(byGrant)) // the highest token of byGrant[:i+1]
	for i, h := range byGrant {
		maxUpTo[i] = h.token
		if i > 0 {
			maxUpTo[i] = max(maxUpTo[i], maxUpTo[i-1])
		}
	}
	for _, h := range byGrant {
		n := sort.Search(len(byGrant), func(i int) bool { return byGrant[i].granted >= h.call }) // granted before h.call
		if n > 0 && maxUpTo[n-1] >= h.token {
			fail("process %d worker %d: token %d, not above token %d granted before its Acquire was called", h.proc, h.worker, h.token, maxUpTo[n-1])
		}
	}

	// At no instant more than limit holders: a sweep over the intervals'
	// ends, a start before an end at the same instant.
	live, at := sweep(hs, limit)
	if len(live) > 0 {
		desc := make([]string, len(live))
		for i, h := range live {
			desc[i] = fmt.Sprintf("token %d (process %d worker %d, [%s, %s])", h.token, h.proc, h.worker, clock(h.granted), clock(h.end()))
		}
		fail("%d holders at %s, above the limit %d: %s", len(live), clock(at), limit, strings.Join(desc, ", "))
	}

	// The victim held when killed, and its slots were taken over: the
	// survivors held all limit slots at once after the kill.
	var survivors []holding
	var lastDeadline int64 // of the victim's holdings left when it was killed
	for _, h := range hs {
		if h.proc != victim {
			survivors = append(survivors, h)
		} else if h.ended == 0 {
			res.victimHeld++
			lastDeadline = max(lastDeadline, h.deadline)
		}
	}
	if res.victimHeld == 0 {
		fail("the victim held nothing when it was killed")
	}
	if took, ok := fullAfter(survivors, killed); ok {
		res.tookOver = true
		res.takeover, res.margin = time.Duration(took-killed), time.Duration(took-lastDeadline)
		if took < lastDeadline { // the sweep finds this too
			fail("the victim's slots taken over at %s, before its holdings' local deadline %s", clock(took), clock(lastDeadline))
		}
	} else if takeover {
		fail("the survivors never held all %d slots after the kill", limit)
	}
	return res
}

// event is one end of an interval: a start (+1) or an end (-1).
type event struct {
	at    int64
	delta int
	h     holding
}

func events(hs []holding) []event {
	es := make([]event, 0, 2*len(hs))
	for _, h := range hs {
		es = append(es, event{h.granted, +1, h}, event{h.end(), -1, h})
	}
	slices.SortFunc(es, func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(b.delta, a.delta)) })
	return es
}

// sweep returns the first set of more than n live holdings, and when.
func sweep(hs []holding, n int) ([]holding, int64) {
	live := map[uint64]holding{}
	for _, e := range events(hs) {
		if e.delta < 0 {
			delete(live, e.h.token)
			continue
		}
		live[e.h.token] = e.h
		if len(live) > n {
			out := make([]holding, 0, len(live))
			for _, h := range live {
				out = append(out, h)
			}
			return out, e.at
		}
	}
	return nil, 0
}

// fullAfter is the first instant from after on at which limit of hs are
// live at once.
func fullAfter(hs []holding, after int64) (int64, bool) {
	n := 0
	for _, e := range events(hs) {
		n += e.delta
		if e.at >= after && n >= limit {
			return e.at, true
		}
	}
	return 0, false
}

func clock(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000000") }

// key names a holding in its process's reports.
type key struct {
	proc  int
	token uint64
}

// records gathers the children's reports; changed is signalled after each.
type records struct {
	mu       sync.Mutex
	holdings map[key]*holding
	all      []*holding
	ready    [procs]bool
	grants   [procs]int  // grants reported
	open     [procs]int  // grants without an end reported
	holding  [procs]bool // it keeps every grant from now on
	kept     [procs]int  // grants reported since
	counted  [procs]bool
	handOffs [procs][2]int64 // its leasehold.handoffs, by notice and by poll
	other    [procs][]string
	fails    []string
	changed  chan struct{}
}

func (r *records) add(proc int, line string) {
	r.mu.Lock()
	defer func() {
		r.mu.Unlock()
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}()
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "sem" {
		r.other[proc] = append(r.other[proc], line)
		return
	}
	bad := func() { r.fails = append(r.fails, fmt.Sprintf("process %d: bad report %q", proc, line)) }
	switch {
	case len(f) == 2 && f[1] == "ready":
		r.ready[proc] = true
	case len(f) == 2 && f[1] == "holding":
		r.holding[proc] = true
	case len(f) == 4 && f[1] == "handoffs":
		notice, err1 := strconv.ParseInt(f[2], 10, 64)
		byPoll, err2 := strconv.ParseInt(f[3], 10, 64)
		if errors.Join(err1, err2) != nil {
			bad()
			return
		}
		r.counted[proc], r.handOffs[proc] = true, [2]int64{notice, byPoll}
	case len(f) == 7 && f[1] == "grant":
		w, err1 := strconv.Atoi(f[2])
		tok, err2 := strconv.ParseUint(f[3], 10, 64)
		call, err3 := strconv.ParseInt(f[4], 10, 64)
		granted, err4 := strconv.ParseInt(f[5], 10, 64)
		deadline, err5 := strconv.ParseInt(f[6], 10, 64)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			bad()
			return
		}
		h := &holding{proc: proc, worker: w, token: tok, call: call, granted: granted, deadline: deadline}
		if _, dup := r.holdings[key{proc, tok}]; dup {
			r.fails = append(r.fails, fmt.Sprintf("process %d: token %d granted twice to it", proc, tok))
		}
		r.holdings[key{proc, tok}] = h
		r.all = append(r.all, h)
		r.grants[proc]++
		r.open[proc]++
		if r.holding[proc] {
			r.kept[proc]++
		}
	case len(f) == 5 && f[1] == "end":
		tok, err1 := strconv.ParseUint(f[2], 10, 64)
		ended, err2 := strconv.ParseInt(f[3], 10, 64)
		h, ok := r.holdings[key{proc, tok}]
		if errors.Join(err1, err2) != nil || !ok || h.ended != 0 {
			bad()
			return
		}
		h.ended, h.how = ended, f[4]
		r.open[proc]--
	case len(f) == 4 && f[1] == "released":
		tok, err1 := strconv.ParseUint(f[2], 10, 64)
		released, err2 := strconv.ParseInt(f[3], 10, 64)
		h, ok := r.holdings[key{proc, tok}]
		if errors.Join(err1, err2) != nil || !ok || h.ended == 0 || h.released != 0 {
			bad()
			return
		}
		h.released = released
	case len(f) >= 2 && f[1] == "error":
		r.fails = append(r.fails, fmt.Sprintf("process %d: %s", proc, line))
	default:
		bad()
	}
}

// await checks cond, under r.mu, at each report until it holds; it fails
// the test when cond does not hold within patience.
func (r *records) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(patience)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-timeout:
			t.Fatalf("%s: not within %v", what, patience)
		}
	}
}

// await waits for a value on ch, for at most patience.
func await[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	return poll.Receive(t, what, patience, ch)
}

// kid is a child process: read is closed when its stdout has ended, waited
// then receives its exit.
type kid struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	read   chan struct{}
	waited chan error
}

func startChild(t *testing.T, r *records, name string, proc int, md mode) *kid {
	cmd := exec.Command(os.Args[0], "-test.run=^TestSemaphoreChild$", "-test.v")
	cmd.Env = append(os.Environ(), childName+"="+name, childAddr+"="+localstore.RedisAddr(), childProc+"="+strconv.Itoa(proc),
		childMode+"="+md.name, childSchema+"="+md.schema)
	stdin, err := cmd.StdinPipe() // the child stops when it closes
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k := &kid{cmd: cmd, stdin: stdin, read: make(chan struct{}), waited: make(chan error, 1)}
	go func() {
		defer close(k.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.add(proc, sc.Text())
		}
	}()
	go func() {
		<-k.read // Wait closes the pipe: only once it is read to its end
		k.waited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		select {
		case <-k.read:
		case <-time.After(patience):
			t.Errorf("child %d: its output did not end within %v of the kill", proc, patience)
		}
	})
	return k
}

// TestSemaphoreChild is a process of the tests above (skipped unless it runs
// as one of their children): it says "ready", starts its workers at "go" on
// stdin, keeps every grant from "hold" on, reports every grant and every end
// on stdout (and, when its workers wait, its hand-off counters at the end),
// and stops when stdin closes (the test is over, or the test process died).
func TestSemaphoreChild(t *testing.T) {
	name := os.Getenv(childName)
	if name == "" {
		t.Skip("a child process of TestSemaphoreAcrossKilledProcess and TestSemaphoreHandOffAcrossKilledProcess")
	}
	md, ok := modeNamed(os.Getenv(childMode))
	if !ok {
		t.Fatalf("unknown mode %q", os.Getenv(childMode))
	}
	var b backend.Backend
	if md.store == "mysql" {
		b = localstore.MySQLOn(t, os.Getenv(childSchema))
	} else {
		c := goredis.NewClient(&goredis.Options{Addr: os.Getenv(childAddr), ContextTimeoutEnabled: true})
		defer c.Close()
		rb, err := redis.New(c)
		if err != nil {
			t.Fatal(err)
		}
		defer rb.Close()
		b = rb
	}
	proc, err := strconv.Atoi(os.Getenv(childProc))
	if err != nil {
		t.Fatal(err)
	}
	opts := []leasehold.Option{leasehold.WithOwner(owner(proc))}
	reader := sdkmetric.NewManualReader()
	if md.wait {
		provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer provider.Shutdown(context.Background())
		opts = append(opts, leasehold.WithPickupWindow(md.pickup), leasehold.WithMeterProvider(provider))
	}
	m, err := leasehold.New(b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Error(err)
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep := &reporter{}
	started, hold, stdinDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stdinDone)
		defer cancel()
		sc := bufio.NewScanner(os.Stdin)
		if sc.Scan() && sc.Text() == "go" {
			close(started)
		}
		for sc.Scan() {
			if sc.Text() == "hold" {
				close(hold)
				rep.line("holding") // every grant reported after this line is kept
			}
		}
	}()
	rep.line("ready")
	select {
	case <-started:
	case <-stdinDone:
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { work(ctx, t, m, name, w, md, rep, hold) })
	}
	wg.Wait()
	<-stdinDone // the workers stop only once stdin has closed
	if md.wait {
		notice, byPoll := handOffCounts(t, reader)
		rep.line("handoffs", notice, byPoll)
	}
}

// work takes and gives back holdings of name until ctx ends; from hold's
// closing on, it keeps what it is granted.
func work(ctx context.Context, t *testing.T, m *leasehold.Manager, name string, w int, md mode, rep *reporter, hold <-chan struct{}) {
	opts := []leasehold.AcquireOption{leasehold.WithLimit(limit), leasehold.WithTTL(md.ttl), leasehold.WithoutAutoRenew()}
	if md.wait {
		opts = append(opts, leasehold.WithWait(leasehold.WaitForever))
	}
	for ctx.Err() == nil {
		call := time.Now()
		l, err := m.Acquire(ctx, name, opts...)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case !md.wait && errors.Is(err, leasehold.ErrNotAcquired):
			pause(ctx, pauseMin, pauseMax, nil)
			continue
		default:
			rep.line("error", strconv.Quote(err.Error()))
			t.Errorf("worker %d: %v", w, err)
			return
		}
		granted := time.Now()
		h, ok := lease.HoldingFrom(l.Context())
		if !ok {
			t.Errorf("worker %d: a lease's context without its holding", w)
			releaseNow(t, l)
			return
		}
		renewed := true
		if md.wait {
			// A hand-off's pickup renewal would move its deadline after
			// the grant; this renewal is that one, or follows it, and no
			// other comes: the deadline it gives is the holding's last.
			renewed = renewNow(l) == nil
		}
		// Reported before the holder does anything under the lease: a
		// holding a kill leaves unreported was never acted on.
		rep.line("grant", w, l.Token(), call.UnixNano(), granted.UnixNano(), h.Deadline().UnixNano())
		if !renewed {
			// Its deadline may still move (a pickup renewal retried):
			// given back at once, it is believed in no longer than that.
			rep.line("end", l.Token(), time.Now().UnixNano(), "unrenewed")
			releaseNow(t, l)
			rep.line("released", l.Token(), time.Now().UnixNano())
			continue
		}
		select {
		case <-hold:
			<-ctx.Done() // kept until the process is killed (or the test ends)
			return
		default:
		}
		pause(ctx, holdMin, holdMax, l.Lost())
		how := "released"
		if l.Err() != nil {
			how = "lost" // at its local deadline: the end reported is later
		}
		// The end is reported before the Release call: a kill after the
		// release leaves no holding believed held to its deadline that the
		// store had freed.
		rep.line("end", l.Token(), time.Now().UnixNano(), how)
		releaseNow(t, l)
		rep.line("released", l.Token(), time.Now().UnixNano())
		pause(ctx, pauseMin, pauseMax, nil)
	}
}

func renewNow(l *leasehold.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	return l.Renew(ctx, 0)
}

// handOffCounts reads the Manager's leasehold.handoffs counter: grants to
// its queued waiters by notice and by poll.
func handOffCounts(t *testing.T, reader *sdkmetric.ManualReader) (notice, byPoll int64) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			sum, ok := mt.Data.(metricdata.Sum[int64])
			if !ok || mt.Name != "leasehold.handoffs" {
				continue
			}
			for _, dp := range sum.DataPoints {
				switch v, _ := dp.Attributes.Value("leasehold.handoff.via"); v.AsString() {
				case "notice":
					notice = dp.Value
				case "poll":
					byPoll = dp.Value
				}
			}
		}
	}
	return notice, byPoll
}

func releaseNow(t *testing.T, l *leasehold.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.Errorf("release of token %d: %v", l.Token(), err)
	}
}

// pause waits for a random time in [lo, hi), or until ctx ends or stop
// (if not nil) is closed.
func pause(ctx context.Context, lo, hi time.Duration, stop <-chan struct{}) {
	tm := time.NewTimer(lo + rand.N(hi-lo))
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	case <-stop:
	}
}

// reporter writes the child's reports, one line each.
type reporter struct{ mu sync.Mutex }

func (r *reporter) line(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(os.Stdout, append([]any{"sem"}, args...)...)
}

// handOffStream is the store's hand-off notices for one name, as the
// parent sees them on Redis pub/sub (backend/redis/scripts/CONTRACT.md):
// every hand-off a release made, to whichever process's waiter.
type handOffStream struct {
	mu       sync.Mutex
	to       map[uint64]int   // token: the process it was handed to
	at       map[uint64]int64 // token: when its notice came
	bad      []string
	sentinel string
	done     chan struct{} // closed when the sentinel came: all before it came too
}

// handOffChannels are the channels of every Manager's hand-off notices on
// the default prefix.
const handOffChannels = "leasehold:handoff:"

func watchHandOffs(t *testing.T, c *goredis.Client, name string) *handOffStream {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	ps := c.PSubscribe(ctx, handOffChannels+"*")
	if _, err := ps.Receive(ctx); err != nil { // subscribed from here on
		t.Fatal(err)
	}
	s := &handOffStream{to: map[uint64]int{}, at: map[uint64]int64{}, sentinel: handOffChannels + "sentinel-" + name, done: make(chan struct{})}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for msg := range ps.Channel(goredis.WithChannelSize(1 << 16)) {
			if msg.Channel == s.sentinel {
				close(s.done)
				continue
			}
			s.add(name, msg.Payload)
		}
	}()
	t.Cleanup(func() {
		ps.Close()
		<-stopped
	})
	return s
}

// add records a hand-off message, name NUL owner NUL attempt NUL token NUL
// poll, if it is of name.
func (s *handOffStream) add(name, payload string) {
	f := strings.Split(payload, "\x00")
	if len(f) != 5 || f[0] != name {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, err := strconv.ParseUint(f[3], 10, 64)
	proc, ok := strings.CutPrefix(f[1], "process-")
	p, err2 := strconv.Atoi(proc)
	if err != nil || err2 != nil || !ok {
		s.bad = append(s.bad, fmt.Sprintf("a hand-off message %q", payload))
		return
	}
	if _, dup := s.to[tok]; dup {
		s.bad = append(s.bad, fmt.Sprintf("token %d handed off twice", tok))
	}
	s.to[tok], s.at[tok] = p, time.Now().UnixNano()
}

// drain returns every hand-off made so far: it publishes the sentinel,
// which comes after every message published before it.
func (s *handOffStream) drain(t *testing.T, c *goredis.Client) map[uint64]int {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := c.Publish(ctx, s.sentinel, "end").Err(); err != nil {
		t.Fatal(err)
	}
	await(t, "the hand-off notices' sentinel", s.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bad {
		t.Error(b)
	}
	return maps.Clone(s.to)
}

// queuedIn reports whether the store's queue of name has an entry of owner
// (the layout: backend/redis/scripts/CONTRACT.md, "The waiter queue").
func queuedIn(ctx context.Context, c *goredis.Client, name, owner string) (bool, error) {
	prefix := "leasehold:{" + name + "}:" // the name needs no escaping
	var queue *goredis.StringSliceCmd
	var entries *goredis.MapStringStringCmd
	if _, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		queue = p.LRange(ctx, prefix+"queue", 0, -1)
		entries = p.HGetAll(ctx, prefix+"entries")
		return nil
	}); err != nil && !errors.Is(err, goredis.Nil) {
		return false, err
	}
	for _, attempt := range queue.Val() {
		// exp_ms NUL pickup_ms NUL turn_ms NUL poll NUL notify NUL owner NUL meta [NUL limit]
		if f := strings.Split(entries.Val()[attempt], "\x00"); len(f) >= 6 && f[5] == owner {
			return true, nil
		}
	}
	return false, nil
}

// dumpOnFailure writes the run's holdings, by grant, and its hand-offs to a
// file for a failed run: the checker's verdict names only the first fault.
func dumpOnFailure(t *testing.T, r *records, s *handOffStream, killed time.Time) {
	if !t.Failed() {
		return
	}
	r.mu.Lock()
	hs := make([]holding, 0, len(r.all))
	for _, h := range r.all {
		hs = append(hs, *h)
	}
	r.mu.Unlock()
	f, err := os.CreateTemp("", "semaphore-run-*.txt")
	if err != nil {
		t.Log(err)
		return
	}
	defer f.Close()
	slices.SortFunc(hs, func(a, b holding) int { return cmp.Compare(a.granted, b.granted) })
	fmt.Fprintf(f, "killed %s\n", clock(killed.UnixNano()))
	for _, h := range hs {
		fmt.Fprintf(f, "p%d w%d token %d call %s granted %s deadline %s ended %s released %s %s\n", h.proc, h.worker, h.token,
			clock(h.call), clock(h.granted), clock(h.deadline), clock(h.ended), clock(h.released), h.how)
	}
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		for tok, p := range s.to {
			fmt.Fprintf(f, "handoff token %d to p%d seen %s\n", tok, p, clock(s.at[tok]))
		}
	}
	t.Logf("the run's holdings: %s", f.Name())
}

// tokenSampler reads the name's fence counter from the store again and
// again, until stopped.
type tokenSampler struct {
	samples []tokenSample
	quit    chan struct{}
	done    chan struct{}
}

// sampleEvery is the samples' period: the narrower the bounds on each
// token's issue, the fewer releases they overlap.
const sampleEvery = 2 * time.Millisecond

func sampleTokens(t *testing.T, c *goredis.Client, name string) *tokenSampler {
	s := &tokenSampler{quit: make(chan struct{}), done: make(chan struct{})}
	record := "leasehold:{" + name + "}:lease" // the name needs no escaping
	go func() {
		defer close(s.done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			sent := time.Now().UnixNano()
			v, err := c.HGet(ctx, record, "token").Uint64()
			got := time.Now().UnixNano()
			cancel()
			switch {
			case errors.Is(err, goredis.Nil): // no grant yet
			case err != nil:
				t.Errorf("reading the token counter: %v", err)
				return
			}
			s.samples = append(s.samples, tokenSample{sent: sent, got: got, token: v})
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// stop ends the sampling and returns the samples.
func (s *tokenSampler) stop() []tokenSample {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
	return s.samples
}
