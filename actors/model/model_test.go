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
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// check is one run of the model checker: the model built with defines,
// pan compiled with cflags and run with args.
type check struct {
	name    string
	defines []string // spin -D macros: the configuration and the variant
	cflags  []string // gcc -D flags for pan
	args    []string // pan's own flags
	// want is empty for the real design (no error may be found); for a
	// broken variant, the properties one of which its counterexample must
	// break.
	want []string
}

// Bounds of the quick run (make test) and of the deep one (make model-deep).
var (
	quick = []string{"-DNM=2", "-DTMAX=2", "-DMAXATT=1", "-DMAXFAULT=1", "-DNOCLOSE"}
	deep  = []string{"-DNM=3", "-DTMAX=4", "-DMAXATT=2", "-DMAXFAULT=2"}
	// The hand-off needs the third Manager (the dead contender, a waiter).
	quickHandoff = []string{"-DNM=3", "-DTMAX=2", "-DMAXATT=1", "-DMAXFAULT=1", "-DNOCLOSE", "-DHANDOFF", "-DDEADWAITER"}
	deepHandoff  = []string{"-DNM=3", "-DTMAX=4", "-DMAXATT=2", "-DMAXFAULT=2", "-DHANDOFF", "-DDEADWAITER"}
	live         = []string{"-DNM=3", "-DTMAX=3", "-DMAXFAULT=1", "-DMAXRESTART=0", "-DLIVE"}
	safety       = []string{"-DSAFETY", "-DCOLLAPSE"}
)

// deepRun reports whether the exhaustive run was asked for.
func deepRun() bool { return os.Getenv("LEASEHOLD_MODEL_DEEP") == "1" }

func with(base []string, more ...string) []string {
	return append(append([]string{}, base...), more...)
}

// TestDesign checks properties (a)-(d) on the design, and (e) on the
// hand-off design (not built yet): no counterexample may exist.
func TestDesign(t *testing.T) {
	cfg, hcfg, memory := quick, quickHandoff, "-w24"
	if deepRun() {
		cfg, hcfg, memory = deep, deepHandoff, "-w28"
	}
	checks := []check{{name: "safety", defines: cfg, cflags: safety, args: []string{memory}}}
	if deepRun() {
		// Not yet part of the quick run: the three-Manager hand-off space
		// does not fit its time, and the liveness runs are unmeasured.
		checks = append(checks,
			check{name: "handoff-safety", defines: hcfg, cflags: safety, args: []string{memory}},
			check{name: "liveness", defines: live, cflags: []string{"-DCOLLAPSE", "-DNFAIR=3"}, args: []string{"-a", "-f", memory}},
			check{name: "handoff-liveness", defines: with(live, "-DHANDOFF"), cflags: []string{"-DCOLLAPSE", "-DNFAIR=3"}, args: []string{"-a", "-f", memory}},
		)
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { run(t, c) })
	}
}

// TestBrokenVariants checks that the model has teeth: each variant breaks
// one decision of the design, and the checker must find a counterexample.
func TestBrokenVariants(t *testing.T) {
	for _, c := range []check{
		{name: "no-margin", defines: with(quick, "-DNOMARGIN"), want: []string{"a", "b"}},
		{name: "deadline-at-receive", defines: with(quick, "-DRECVDEADLINE"), want: []string{"a", "b"}},
		{name: "release-by-owner", defines: with(quick, "-DRELBYOWNER"), want: []string{"a", "b"}},
		{name: "same-owner-refresh", defines: with(quick, "-DSAMEOWNER"), want: []string{"a", "b"}},
		// With ticks for a clock, the time part of a token cannot tell apart
		// two grants in one tick: without the grace the first thing found is
		// a repeated token (c). NOCHECK_C asks for the overlap as well.
		{name: "no-restart-grace", defines: with(quick, "-DNOGRACE"), want: []string{"c"}},
		{name: "no-restart-grace-overlap", defines: with(quick, "-DNOGRACE", "-DNOCHECK_C"), want: []string{"a", "b"}},
		{name: "handoff-without-pickup-window", defines: with(quickHandoff, "-DNOPICKUP"), want: []string{"e"}},
	} {
		c.cflags = safety
		c.args = []string{"-w24"}
		t.Run(c.name, func(t *testing.T) { run(t, c) })
	}
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

// result is what pan reported.
type result struct {
	errors   int
	states   string // states stored
	vector   string // state-vector size
	elapsed  string
	violated string // the assertion or claim that failed
	output   string
}

func run(t *testing.T, c check) {
	spin, gcc := tools(t)
	timeout := 5 * time.Minute
	if deepRun() {
		timeout = 3 * time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	dir := t.TempDir()
	model, err := os.ReadFile("lease.pml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lease.pml"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := func(name string, args ...string) string {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil && name != "./pan" {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	start := time.Now()
	exe(spin, append(append([]string{}, c.defines...), "-a", "lease.pml")...)
	exe(gcc, append(append([]string{"-O0", "-w", "-o", "pan"}, c.cflags...), "pan.c")...)
	r := parse(exe("./pan", append([]string{"-m1000000"}, c.args...)...))
	t.Logf("%s: %s states, state vector %s, pan %ss, %v in all",
		strings.Join(c.defines, " "), r.states, r.vector, r.elapsed, time.Since(start).Round(time.Millisecond))
	if strings.Contains(r.output, "error: max search depth too small") {
		t.Fatalf("search depth too small:\n%s", r.output)
	}

	var trail string
	if r.errors > 0 {
		trail = readableTrail(exe(spin, append(append([]string{}, c.defines...), "-t", "-T", "-k", "lease.pml.trail", "lease.pml")...))
	}
	switch {
	case len(c.want) == 0 && r.errors > 0:
		t.Errorf("the design breaks %s:\n%s", property(r.violated), trail)
	case len(c.want) == 0:
		if !strings.Contains(r.output, "errors: 0") {
			t.Fatalf("pan did not finish:\n%s", r.output)
		}
	case r.errors == 0:
		t.Errorf("no counterexample for the broken variant (want one breaking %v):\n%s", c.want, r.output)
	default:
		got := property(r.violated)
		ok := false
		for _, w := range c.want {
			ok = ok || got == "("+w+")"
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
	vectorRe  = regexp.MustCompile(`State-vector (\d+ byte)`)
	elapsedRe = regexp.MustCompile(`elapsed time ([\d.e+]+) seconds`)
	failRe    = regexp.MustCompile(`pan:\d+: (.*) \(at depth`)
)

func parse(out string) result {
	r := result{output: out, errors: -1}
	if m := errorsRe.FindStringSubmatch(out); m != nil {
		r.errors, _ = strconv.Atoi(m[1])
	}
	if m := storedRe.FindStringSubmatch(out); m != nil {
		r.states = m[1]
	}
	if m := vectorRe.FindStringSubmatch(out); m != nil {
		r.vector = m[1]
	}
	if m := elapsedRe.FindStringSubmatch(out); m != nil {
		r.elapsed = m[1]
	}
	if m := failRe.FindStringSubmatch(out); m != nil {
		r.violated = m[1]
	}
	return r
}

// property names the property a failed assertion or claim states.
func property(violated string) string {
	switch {
	case strings.Contains(violated, "acceptance cycle") || strings.Contains(violated, "claim"):
		return "(e) eventually acquires"
	case strings.Contains(violated, "sPickAt"):
		return "(e)"
	case strings.Contains(violated, "tok_>lastTok"):
		return "(c)"
	case strings.Contains(violated, "unowned"):
		return "(d)"
	case strings.Contains(violated, "!=lastTok"):
		return "(b)"
	case strings.Contains(violated, "deadline"):
		return "(a)"
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
