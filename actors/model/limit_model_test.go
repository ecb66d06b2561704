package model

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLimitModel checks limit.pml, the model of a name acquired WithLimit(2)
// by three Managers: never more than 2 holders by their local deadlines
// (a), tokens increasing across all holders (c). The design must have no
// counterexample; each broken variant must have one that breaks the
// property it names.
func TestLimitModel(t *testing.T) {
	spin, gcc := tools(t)
	dir := t.TempDir()
	start := time.Now()
	pan := buildLimit(t, spin, gcc, dir)
	t.Logf("verifier built in %v", time.Since(start).Round(time.Millisecond))

	// make test: no faults, exact clocks (no drift, no margin: every
	// deadline at its tightest), 2.9 million states. make model-deep adds a
	// store clock that gains a tick (and the margin that tick), 5.8 million.
	// (The variants run with the drift: the margin's has to.) A fault, or
	// two attempts per Manager, is beyond 4 GB and a few minutes: not run.
	// An acquire's hand-off of a slot freed by expiry needs four attempts
	// (a holder, a waiter, the caller, the one whose slot expired), so
	// these runs do not reach it. With Manager 0 making a second one
	// (LH_MAXATT0=2) they do, past 66 million states: not run. There two
	// waiters that each miss their pickup window can be handed a freed
	// slot in turn without end, and the byte token counter wraps, which
	// (c) reports: such a run needs tokens kept by their order only.
	design := []check{{name: "limit-2-of-3-managers", cfg: "LH_MAXATT=1 LH_MAXFAULT=0 LH_DRIFT=0"}}
	if deepRun() {
		design = append(design, check{name: "limit-drift", cfg: "LH_MAXATT=1 LH_MAXFAULT=0 LH_DRIFT=1"})
	}
	const teeth = "LH_MAXATT=1 LH_MAXFAULT=0 LH_DRIFT=1"
	broken := []check{
		// The store counts its slots one short: a third holder.
		{name: "limit-store-grants-one-too-many", cfg: teeth + " LH_V=1", want: []string{"a"}},
		// No safety margin against the store's drift: a holder outlives
		// its slot, which the store has given to another.
		{name: "limit-no-margin", cfg: teeth + " LH_V=2", want: []string{"a"}},
		{name: "limit-deadline-at-receive", cfg: teeth + " LH_V=4", want: []string{"a"}},
		// A hand-off that keeps the released holding's token.
		{name: "limit-hand-off-keeps-the-token", cfg: teeth + " LH_V=8", want: []string{"c"}},
		// An acquire that hands a slot freed by expiry to a queued head
		// without advancing the counter: that holding's token is the
		// last one granted. Such a hand-off needs a fourth attempt (a
		// holder, a queued head, a caller, and the one whose slot
		// expired): Manager 0 makes two.
		{name: "limit-free-slot-hand-off-without-a-new-token", cfg: teeth + " LH_MAXATT0=2 LH_V=16", want: []string{"c"}},
	}
	t.Run("design", func(t *testing.T) {
		for _, c := range design {
			t.Run(c.name, func(t *testing.T) { runLimit(t, pan, c) })
		}
	})
	t.Run("broken", func(t *testing.T) {
		for _, c := range broken {
			t.Run(c.name, func(t *testing.T) { runLimit(t, pan, c) })
		}
	})
}

// buildLimit turns limit.pml into its safety verifier. Its searches take
// longer than compiling with optimisation does: -O2 always.
func buildLimit(t *testing.T, spin, gcc, dir string) string {
	t.Helper()
	model, err := os.ReadFile("limit.pml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "limit.pml"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := command(context.Background(), dir, nil, spin, "-a", "limit.pml"); err != nil {
		t.Fatalf("spin -a: %v\n%s", err, out)
	}
	if out, err := command(context.Background(), dir, nil, gcc, "-O2", "-w", "-o", "pan-limit", "-DSAFETY", "-DNOCLAIM", "pan.c"); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return filepath.Join(dir, "pan-limit")
}

// runLimit runs one check of limit.pml: exhaustive for the design (whole
// states stored, no hashing), the first counterexample for a variant.
func runLimit(t *testing.T, pan string, c check) {
	timeout := 5 * time.Minute
	if deepRun() {
		timeout = 3 * time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(filepath.Dir(pan), "limit.pml"), filepath.Join(dir, "limit.pml")); err != nil {
		t.Fatal(err)
	}
	env := strings.Fields(c.cfg)
	args := []string{"-m5000000", "-w24"}
	if deepRun() {
		args = []string{"-m20000000", "-w27"}
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
	switch {
	case len(c.want) == 0 && r.errors > 0:
		replay, _ := command(ctx, dir, env, pan, "-r", "-S")
		t.Errorf("the design breaks %s:\n%s", property(r.violated), lastLines(readableTrail(replay), 60))
	case len(c.want) == 0:
		if r.errors != 0 || strings.Contains(out, "Search not completed") || strings.Contains(out, "max search depth too small") {
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
			t.Errorf("counterexample breaks %s, want one of %v", got, c.want)
		} else {
			t.Logf("counterexample breaks %s", got)
		}
	}
}

// lastLines keeps the last n lines of s (a long trail's end is where it
// breaks).
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
