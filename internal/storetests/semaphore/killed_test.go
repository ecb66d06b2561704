package semaphore_test

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
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

	"github.com/leasehold/leasehold"
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
	// The victim is killed at its first grant after killAfter; the run
	// ends runFor after the start, time enough for its slots to free and
	// be taken.
	killAfter = 2 * time.Second
	runFor    = 7 * time.Second
	victim    = 0
	// Holds and pauses, drawn at random in [min, max).
	holdMin, holdMax   = 2 * time.Millisecond, 40 * time.Millisecond
	pauseMin, pauseMax = 1 * time.Millisecond, 20 * time.Millisecond
	// minGrants is the least progress the run must show.
	minGrants = 100
)

// patience bounds every wait for something that must happen: generous, so
// that a loaded machine does not fail the test, and finite, so that a broken
// one fails rather than hangs.
const patience = 15 * time.Second

// The environment of a child (TestSemaphoreChild).
const (
	childName = "LEASEHOLD_SEMAPHORE_CHILD_NAME"
	childAddr = "LEASEHOLD_SEMAPHORE_CHILD_REDIS"
	childProc = "LEASEHOLD_SEMAPHORE_CHILD_PROC"
)

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
// checker knows it after the kill. (A waiter's hand-off is renewed after its
// grant, which would move its deadline past what was reported.)
func TestSemaphoreAcrossKilledProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	_ = localstore.Redis(t) // skips, or fails, without the local Redis
	name := fmt.Sprintf("semaphore-killed-%d", time.Now().UnixNano())
	r := &records{changed: make(chan struct{}, 1), holdings: map[key]*holding{}}
	kids := make([]*kid, procs)
	for i := range kids {
		kids[i] = startChild(t, r, name, i)
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

	// Kill the victim at its first grant after killAfter: its holding
	// lasts holdMin at least, and the kill follows the report at once.
	<-time.After(killAfter)
	r.mu.Lock()
	before := r.grants[victim]
	r.mu.Unlock()
	r.await(t, "a grant of the victim", func() bool { return r.grants[victim] > before && r.open[victim] > 0 })
	if err := kids[victim].cmd.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	await(t, "the victim's output ending", kids[victim].read)
	killed := time.Now() // the victim is dead: its stdout reached EOF
	if err := await(t, "the victim's exit", kids[victim].waited); err == nil {
		t.Fatal("the victim exited cleanly: it was not killed")
	}

	<-time.After(time.Until(start.Add(runFor)))
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

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.fails {
		t.Error(f)
	}
	hs := make([]holding, 0, len(r.all))
	for _, h := range r.all {
		hs = append(hs, *h)
	}
	res := check(hs, killed.UnixNano())
	for _, p := range res.problems {
		t.Error(p)
	}
	t.Logf("%d grants in %v; the victim held %d when killed; its slots taken over %v after the kill (TTL %v), %v after its last local deadline",
		len(hs), time.Since(start).Round(time.Millisecond), res.victimHeld, res.takeover.Round(time.Millisecond), ttl, res.margin.Round(time.Millisecond))
}

// result is what check found.
type result struct {
	problems   []string
	victimHeld int           // the victim's holdings never ended by their holder
	takeover   time.Duration // from the kill to the survivors holding all limit slots
	margin     time.Duration // from the victim's last local deadline to the takeover
}

// check is the independent checker: it knows nothing but the holdings and
// when the victim was dead.
func check(hs []holding, killed int64) result {
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
		if h.deadline < h.granted {
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
		res.takeover, res.margin = time.Duration(took-killed), time.Duration(took-lastDeadline)
		if took < lastDeadline { // the sweep finds this too
			fail("the victim's slots taken over at %s, before its holdings' local deadline %s", clock(took), clock(lastDeadline))
		}
	} else {
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
	grants   [procs]int // grants reported
	open     [procs]int // grants without an end reported
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
	case len(f) == 5 && f[1] == "end":
		tok, err1 := strconv.ParseUint(f[2], 10, 64)
		ended, err2 := strconv.ParseInt(f[3], 10, 64)
		h, ok := r.holdings[key{proc, tok}]
		if errors.Join(err1, err2) != nil || !ok || h.ended != 0 {
			bad()
			return
		}
		h.ended = ended
		r.open[proc]--
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

func startChild(t *testing.T, r *records, name string, proc int) *kid {
	cmd := exec.Command(os.Args[0], "-test.run=^TestSemaphoreChild$", "-test.v")
	cmd.Env = append(os.Environ(), childName+"="+name, childAddr+"="+localstore.RedisAddr(), childProc+"="+strconv.Itoa(proc))
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

// TestSemaphoreChild is a process of the test above (skipped unless it runs
// as one of its children): it says "ready", starts its workers at "go" on
// stdin, reports every grant and every end on stdout, and stops when stdin
// closes (the test is over, or the test process died).
func TestSemaphoreChild(t *testing.T) {
	name := os.Getenv(childName)
	if name == "" {
		t.Skip("a child process of TestSemaphoreAcrossKilledProcess")
	}
	c := goredis.NewClient(&goredis.Options{Addr: os.Getenv(childAddr), ContextTimeoutEnabled: true})
	defer c.Close()
	b, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := leasehold.New(b, leasehold.WithOwner("process-"+os.Getenv(childProc)))
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
	started, stdinDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stdinDone)
		defer cancel()
		sc := bufio.NewScanner(os.Stdin)
		if sc.Scan() && sc.Text() == "go" {
			close(started)
		}
		for sc.Scan() {
		}
	}()
	rep := &reporter{}
	rep.line("ready")
	select {
	case <-started:
	case <-stdinDone:
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { work(ctx, t, m, name, w, rep) })
	}
	wg.Wait()
	<-stdinDone // the workers stop only once stdin has closed
}

// work takes and gives back holdings of name until ctx ends.
func work(ctx context.Context, t *testing.T, m *leasehold.Manager, name string, w int, rep *reporter) {
	for ctx.Err() == nil {
		call := time.Now()
		l, err := m.Acquire(ctx, name, leasehold.WithLimit(limit), leasehold.WithTTL(ttl), leasehold.WithoutAutoRenew())
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case errors.Is(err, leasehold.ErrNotAcquired):
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
		// Reported before the holder does anything under the lease: a
		// holding a kill leaves unreported was never acted on.
		rep.line("grant", w, l.Token(), call.UnixNano(), granted.UnixNano(), h.Deadline().UnixNano())
		pause(ctx, holdMin, holdMax, l.Lost())
		ended, how := time.Now(), "released"
		if l.Err() != nil {
			how = "lost" // at its local deadline: ended is later
		}
		releaseNow(t, l)
		rep.line("end", l.Token(), ended.UnixNano(), how)
		pause(ctx, pauseMin, pauseMax, nil)
	}
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
