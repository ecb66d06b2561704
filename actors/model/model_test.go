package model

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The model is compiled into two verifiers, once per test run: one checks
// the safety properties (assertions: (a)-(d) and the pickup-window bound of
// (e)), the other the liveness property (e) as an LTL formula under weak
// fairness. Every configuration and broken variant is chosen when a verifier
// starts, through LH_* environment variables (see readConfig in lease.pml),
// so nothing is compiled per check.
type verifier int

const (
	safetyPan verifier = iota
	livenessPan
)

// check is one run of a verifier.
type check struct {
	name string
	pan  verifier
	cfg  string // LH_* settings, space separated
	// want is empty for the design (no counterexample may exist); for a
	// broken variant, the properties one of which its counterexample must
	// break.
	want []string
}

// The bounds. Time is never bounded: every timer is kept as ticks left, so
// the clock may run for ever and every check covers any number of ticks,
// pauses of any length included. What is bounded is the attempts per
// Manager (MAXATT), the faults in all (MAXFAULT: lost requests, lost
// answers, errors while the request is still on its way, lost notices and,
// in the liveness runs, pauses while something is due), the store's
// restarts without data (MAXRESTART), and whether the last Manager may be
// closed (CLOSE). The store's clock may gain DRIFT ticks (1 unless said) on
// the Managers', and the safety margin is that drift.
//
// Time in ticks of half the TTL (2 unless LH_TTL says): the hand-off's pickup
// window is 1 tick (LH_PICKUP), a queue entry lives 3 (LH_QTTL: three pickup
// windows, as entryTTL). A hand-off can be taken from its notice only if
// more than a quarter of the window is left after the margin: with a drift
// of a tick, never in a window of one tick. So the hand-off checks that
// cover the pickup by notice run without drift (LH_DRIFT=0, no margin: the
// local deadline is exactly the send time of the poll plus the window, no
// slack at all), and with a drift of a tick in ticks of a third of the TTL
// and a pickup window of 2 (LH_TTL=3 LH_PICKUP=2, model-deep: twelve times
// the states).
const (
	// make test.
	quickSafety2 = "LH_NM=2 LH_MAXATT=1 LH_MAXFAULT=1 LH_MAXRESTART=1 LH_CLOSE=1"
	quickSafety3 = "LH_NM=3 LH_MAXATT=1 LH_MAXFAULT=0 LH_MAXRESTART=1 LH_CLOSE=1"
	quickHandoff = "LH_NM=3 LH_MAXATT=1 LH_MAXFAULT=0 LH_MAXRESTART=0 LH_CLOSE=1 LH_HANDOFF=1 LH_DEAD=1 LH_DRIFT=0"
	quickLive    = "LH_NM=3 LH_LIVE=1 LH_MAXATT=1 LH_MAXFAULT=0 LH_MAXRESTART=0 LH_CLOSE=0 LH_DEAD=1"
	// The broken variants are found within these.
	teeth        = "LH_NM=2 LH_MAXATT=1 LH_MAXFAULT=1 LH_MAXRESTART=1 LH_CLOSE=0"
	teethHandoff = "LH_NM=3 LH_MAXATT=1 LH_MAXFAULT=0 LH_MAXRESTART=0 LH_CLOSE=0 LH_HANDOFF=1 LH_DEAD=1"
	teethNotice  = teethHandoff + " LH_DRIFT=0"

	// make model-deep: larger bounds, each search still exhaustive. (Two
	// faults with two attempts each, or with a hand-off a fault and a
	// restart together, are each beyond 45 million states: not run. A
	// hand-off with a fault and Close is 59 million states, 9 GB: run once
	// by hand, not here.)
	deepSafety3       = "LH_NM=3 LH_MAXATT=1 LH_MAXFAULT=1 LH_MAXRESTART=1 LH_CLOSE=1"
	deepSafetyAtt     = "LH_NM=2 LH_MAXATT=2 LH_MAXFAULT=1 LH_MAXRESTART=1 LH_CLOSE=1"
	deepSafetyFaults  = "LH_NM=2 LH_MAXATT=1 LH_MAXFAULT=2 LH_MAXRESTART=1 LH_CLOSE=1"
	deepHandoffDrift  = "LH_NM=3 LH_MAXATT=1 LH_MAXFAULT=0 LH_MAXRESTART=0 LH_CLOSE=1 LH_HANDOFF=1 LH_DEAD=1 LH_TTL=3 LH_PICKUP=2"
	deepHandoffFault  = "LH_NM=3 LH_MAXATT=1 LH_MAXFAULT=1 LH_MAXRESTART=0 LH_CLOSE=0 LH_HANDOFF=1 LH_DEAD=1 LH_DRIFT=0"
	deepHandoffReboot = "LH_NM=3 LH_MAXATT=1 LH_MAXFAULT=0 LH_MAXRESTART=1 LH_CLOSE=1 LH_HANDOFF=1 LH_DEAD=1 LH_DRIFT=0"
	// M1's caller tries again after an error: one attempt more than faults.
	deepLive = "LH_NM=3 LH_LIVE=1 LH_MAXATT=2 LH_MAXFAULT=1 LH_MAXRESTART=0 LH_CLOSE=0 LH_DEAD=1"
)

// Variant bits (V in lease.pml).
const (
	vNoMargin = 1 << iota
	vRecvDeadline
	vRelByOwner
	vSameOwner
	vNoGrace
	vNoPickup
	vAsWritten
	vClockless
	vNoticeArrival
	vAnyPoll
)

func variant(base string, v int, more ...string) string {
	return strings.Join(append([]string{base, "LH_V=" + strconv.Itoa(v)}, more...), " ")
}

// deepRun reports whether the exhaustive run was asked for.
func deepRun() bool { return os.Getenv("LEASEHOLD_MODEL_DEEP") == "1" }

// TestModel builds the two verifiers and runs every check: the design's
// properties (no counterexample may exist) and the broken variants (each
// must give one).
func TestModel(t *testing.T) {
	spin, gcc := tools(t)
	dir := t.TempDir()
	start := time.Now()
	pans := build(t, spin, gcc, dir)
	t.Logf("verifiers built in %v", time.Since(start).Round(time.Millisecond))

	design := []check{
		{name: "safety-2-managers", pan: safetyPan, cfg: quickSafety2},
		{name: "safety-3-managers", pan: safetyPan, cfg: quickSafety3},
		{name: "handoff-safety", pan: safetyPan, cfg: quickHandoff},
		{name: "liveness", pan: livenessPan, cfg: quickLive},
		{name: "handoff-liveness", pan: livenessPan, cfg: quickLive + " LH_HANDOFF=1"},
		{name: "handoff-notice-liveness", pan: livenessPan, cfg: quickLive + " LH_HANDOFF=1 LH_DRIFT=0"},
	}
	if deepRun() {
		design = []check{
			{name: "safety-3-managers", pan: safetyPan, cfg: deepSafety3},
			{name: "safety-2-attempts", pan: safetyPan, cfg: deepSafetyAtt},
			{name: "safety-2-faults", pan: safetyPan, cfg: deepSafetyFaults},
			{name: "handoff-safety-drift", pan: safetyPan, cfg: deepHandoffDrift},
			{name: "handoff-safety-fault", pan: safetyPan, cfg: deepHandoffFault},
			{name: "handoff-safety-restart", pan: safetyPan, cfg: deepHandoffReboot},
			{name: "liveness", pan: livenessPan, cfg: deepLive},
			{name: "handoff-liveness", pan: livenessPan, cfg: deepLive + " LH_HANDOFF=1"},
			{name: "handoff-notice-liveness", pan: livenessPan, cfg: deepLive + " LH_HANDOFF=1 LH_DRIFT=0"},
		}
	}
	t.Run("design", func(t *testing.T) {
		for _, c := range design {
			t.Run(c.name, func(t *testing.T) { run(t, pans, c) })
		}
	})

	t.Run("broken", func(t *testing.T) {
		for _, c := range []check{
			{name: "no-margin", cfg: variant(teeth, vNoMargin), want: []string{"a", "b"}},
			{name: "deadline-at-receive", cfg: variant(teeth, vRecvDeadline), want: []string{"a", "b"}},
			{name: "release-by-owner", cfg: variant(teeth, vRelByOwner), want: []string{"a", "b"}},
			{name: "same-owner-refresh", cfg: variant(teeth, vSameOwner), want: []string{"a", "b"}},
			// The variant takes the store's clock to be past every earlier
			// token at the restart, so that the overlap is what breaks.
			{name: "no-restart-grace", cfg: variant(teeth, vNoGrace), want: []string{"a", "b"}},
			// (c) has teeth of its own: tokens from the counter alone
			// repeat after a restart, grace or not.
			{name: "token-without-clock", cfg: variant(teeth, vClockless), want: []string{"c"}},
			{name: "handoff-without-pickup-window", cfg: variant(teethHandoff, vNoPickup), want: []string{"e"}},
			// The hand-off as first written (see HANDOFF.md):
			// after a holder's expiry a dead head blocks the others for as
			// long as its queue entry lives.
			{name: "handoff-as-first-written", cfg: variant(teethHandoff, vAsWritten), want: []string{"e"}},
			// A hand-off taken from its notice holds until the poll's send
			// time plus the pickup window: counted from the notice's arrival
			// it outlasts the store's hand-off. And only a notice carrying
			// the latest poll's number bounds when the hand-off was made: an
			// earlier poll's may be of a hand-off already taken back.
			{name: "handoff-deadline-at-notice", cfg: variant(teethNotice, vNoticeArrival), want: []string{"a", "b"}},
			{name: "handoff-notice-any-poll", cfg: variant(teethNotice, vAnyPoll), want: []string{"a", "b"}},
			// Not a broken design but a check of the check: a waiter whose
			// caller does not try again after a grant that came too late
			// (one pause) never acquires, and the liveness check says so.
			{name: "liveness-check-has-teeth", pan: livenessPan, cfg: "LH_NM=3 LH_LIVE=1 LH_MAXATT=1 LH_MAXFAULT=1 LH_MAXRESTART=0 LH_CLOSE=0 LH_DEAD=1 LH_HANDOFF=1", want: []string{"e"}},
		} {
			t.Run(c.name, func(t *testing.T) { run(t, pans, c) })
		}
	})
}

// tools finds spin and gcc, or skips (fails when services are required).
func tools(t *testing.T) (spin, gcc string) {
	t.Helper()
	var missing []string
	spin, err := exec.LookPath("spin")
	if err != nil {
		missing = append(missing, "spin")
	}
	gcc, err = exec.LookPath("gcc")
	if err != nil {
		missing = append(missing, "gcc")
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("the model checker needs %s on PATH (.ci/ensure-spin installs it)", strings.Join(missing, " and "))
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return spin, gcc
}

// build turns lease.pml into the two verifiers, compiled side by side.
//
// Quick run: -O0 (compiling with optimisation would take longer than the
// searches). Deep run: -O2. Every search stores whole states: exhaustive, no
// state is skipped by hashing. NFAIR=3 sizes the weak-fairness bookkeeping
// for the liveness verifier's five processes.
func build(t *testing.T, spin, gcc, dir string) [2]string {
	t.Helper()
	model, err := os.ReadFile("lease.pml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lease.pml"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := command(context.Background(), dir, nil, spin, "-a", "lease.pml"); err != nil {
		t.Fatalf("spin -a: %v\n%s", err, out)
	}
	opt := "-O0"
	if deepRun() {
		opt = "-O2"
	}
	flags := [2][]string{
		{"-DSAFETY", "-DNOCLAIM"},
		{"-DNFAIR=3"},
	}
	names := [2]string{"pan-safety", "pan-liveness"}
	var (
		wg   sync.WaitGroup
		errs [2]error
		outs [2]string
	)
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{opt, "-w", "-o", names[i]}, flags[i]...)
			outs[i], errs[i] = command(context.Background(), dir, nil, gcc, append(args, "pan.c")...)
		}()
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil {
			t.Fatalf("gcc %s: %v\n%s", names[i], errs[i], outs[i])
		}
	}
	return [2]string{filepath.Join(dir, names[0]), filepath.Join(dir, names[1])}
}

// command runs name in dir with env added to this process's environment.
func command(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// result is what pan reported.
type result struct {
	errors   int
	states   string // states stored
	elapsed  string
	violated string // the assertion or claim that failed
	output   string
}

func run(t *testing.T, pans [2]string, c check) {
	timeout := 5 * time.Minute
	if deepRun() {
		timeout = 3 * time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	// Each check runs in a directory of its own: pan writes its trail
	// beside the model.
	dir := t.TempDir()
	pan := pans[c.pan]
	if err := os.Symlink(filepath.Join(filepath.Dir(pan), "lease.pml"), filepath.Join(dir, "lease.pml")); err != nil {
		t.Fatal(err)
	}
	env := strings.Fields(c.cfg)
	args := []string{"-m100000", "-w22"}
	if deepRun() {
		args = []string{"-m1000000", "-w26"}
	}
	if c.pan == livenessPan {
		args = append(args, "-a", "-f") // acceptance cycles, weak fairness
	}
	if len(c.want) > 0 {
		// A broken variant: look for short counterexamples (iteratively
		// shorter ones after the first), which read better.
		args = []string{"-m10000", "-w20", "-i"}
		if c.pan == livenessPan {
			args = []string{"-m100000", "-w20", "-a", "-f"}
		}
	}
	start := time.Now()
	out, err := command(ctx, dir, env, pan, args...)
	if ctx.Err() != nil {
		t.Fatalf("%s: timed out after %v", c.cfg, timeout)
	}
	if err != nil && !strings.Contains(out, "errors:") {
		t.Fatalf("%s: %v\n%s", c.cfg, err, out)
	}
	r := parse(out)
	t.Logf("%s: %s states, pan %ss, %v in all", c.cfg, r.states, r.elapsed, time.Since(start).Round(time.Millisecond))
	if strings.Contains(out, "max search depth too small") && len(c.want) == 0 {
		t.Fatalf("search depth too small:\n%s", out)
	}

	var trail string
	if r.errors > 0 {
		// The trail pan kept (with -i, the shortest found) is replayed;
		// its violation, not the first one found, names the property.
		replay, _ := command(ctx, dir, env, pan, "-r", "-S")
		trail = readableTrail(replay)
		if m := failRe.FindStringSubmatch(replay); m != nil {
			r.violated = m[1]
		}
	}
	switch {
	case len(c.want) == 0 && r.errors > 0:
		t.Errorf("the design breaks %s:\n%s", property(r.violated), trail)
	case len(c.want) == 0:
		if r.errors != 0 || strings.Contains(out, "Search not completed") {
			t.Fatalf("pan did not finish:\n%s", out)
		}
	case r.errors <= 0:
		t.Errorf("no counterexample for the broken variant (want one breaking %v):\n%s", c.want, out)
	default:
		got := property(r.violated)
		ok := false
		for _, w := range c.want {
			ok = ok || strings.HasPrefix(got, "("+w+")")
		}
		if !ok {
			t.Errorf("counterexample breaks %s, want one of %v:\n%s", got, c.want, trail)
		} else {
			t.Logf("counterexample (breaks %s):\n%s", got, trail)
		}
	}
}

var (
	errorsRe  = regexp.MustCompile(`errors: (\d+)`)
	storedRe  = regexp.MustCompile(`(\d+) states, stored`)
	elapsedRe = regexp.MustCompile(`elapsed time ([\d.e+]+) seconds`)
	failRe    = regexp.MustCompile(`pan:\d+: (.*) \(at depth`)
	propRe    = regexp.MustCompile(`\b([a-e])_[A-Za-z]+\b`)
)

func parse(out string) result {
	r := result{output: out, errors: -1}
	if m := errorsRe.FindStringSubmatch(out); m != nil {
		r.errors, _ = strconv.Atoi(m[1])
	}
	if m := storedRe.FindStringSubmatch(out); m != nil {
		r.states = m[1]
	}
	if m := elapsedRe.FindStringSubmatch(out); m != nil {
		r.elapsed = m[1]
	}
	if m := failRe.FindStringSubmatch(out); m != nil {
		r.violated = m[1]
	}
	return r
}

// property names the property that a failed assertion or claim states:
// every assertion of lease.pml names its property (a_twoHolders, ...).
func property(violated string) string {
	if strings.Contains(violated, "acceptance cycle") {
		return "(e) a waiting Manager eventually acquires"
	}
	if m := propRe.FindStringSubmatch(violated); m != nil {
		return "(" + m[1] + ") " + m[0]
	}
	return "an unknown property: " + violated
}

// readableTrail keeps the model's own trace lines ("t=<tick> st=<store
// clock> <who>: <what>") of a replayed counterexample, and the violation.
func readableTrail(out string) string {
	var b bytes.Buffer
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "t="):
			fmt.Fprintf(&b, "    %s\n", strings.Join(strings.Fields(line), " "))
		case strings.Contains(line, "assertion violated"), strings.Contains(line, "acceptance cycle"), strings.HasPrefix(line, "<<<<<START OF CYCLE"):
			fmt.Fprintf(&b, "    => %s\n", line)
		}
	}
	return b.String()
}
