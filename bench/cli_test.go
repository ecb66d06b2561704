package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Every combination that cannot run as asked is refused by parseFlags, before
// anything runs, with a message naming the flag at fault.
func TestFlagErrorsNameTheFlag(t *testing.T) {
	t.Setenv("LEASEHOLD_SQLSERVER_DSN", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-procs", "2"}, "-procs 2"}, // memory is process-local
		{[]string{"-procs", "1,2"}, "-procs 2"},
		{[]string{"-procs", "x"}, "-procs"},
		{[]string{"-backend", "nosuch"}, "-backend"},
		{[]string{"-backend", "sqlserver"}, "-sqlserver"},
		{[]string{"-locks", "redislock"}, "-locks redislock"},
		{[]string{"-locks", "nosuch"}, "-locks"},
		{[]string{"-backend", "postgres", "-locks", "unsafe"}, "-locks unsafe"},
		{[]string{"-backend", "redis", "-locks", "pglock-protocol"}, "-locks pglock-protocol"},
		{[]string{"-goroutines", "0"}, "-goroutines"},
		{[]string{"-keys", "0"}, "-keys"},
		{[]string{"-dist", "gauss"}, "-dist"},
		{[]string{"-dist", "zipf", "-zipf-s", "1"}, "-zipf-s"},
		{[]string{"-hold", "-1ms"}, "-hold"},
		{[]string{"-ttl", "0s"}, "-ttl"},
		{[]string{"-wait", "soon"}, "-wait"},
		{[]string{"-duration", "0s"}, "-duration"},
		{[]string{"-chaos", "flood"}, "-chaos"},
		{[]string{"-chaos", "restart"}, "-chaos restart"},
		{[]string{"-backend", "postgres", "-chaos", "restart"}, "-chaos restart"},
		{[]string{"-chaos", "cut"}, "-chaos cut"},
		{[]string{"-backend", "redis", "-procs", "2", "-chaos", "pause", "-inprocess"}, "-chaos pause"},
		{[]string{"-format", "xml"}, "-format"},
		{[]string{"-repeat", "0"}, "-repeat"},
		{[]string{"-backend", "redis", "-procs", "2", "-chaos", "kill", "-inprocess"}, "-chaos kill"},
		{[]string{"-backend", "redis", "-procs", "1,4", "-chaos", "kill"}, "-procs 1"},
		{[]string{"-chaos", "kill"}, "-procs 1"},
		{[]string{"-scale", "10", "-repeat", "2"}, "-repeat"},
		{[]string{"-replot", "somewhere", "-repeat", "2"}, "-repeat"},
		{[]string{"-renew", "1s"}, "-renew"},
		{[]string{"-scale", "10", "-procs", "4"}, "-procs"},
		{[]string{"-scale", "10", "-chaos", "cut"}, "-chaos"},
		{[]string{"-scale", "10", "-backend", "sqlserver"}, "-backend"},
		{[]string{"-scale", "10", "-ttl", "1s", "-renew", "2s"}, "-renew"},
		{[]string{"-scale", "10", "-locks", "redsync"}, "-locks redsync"},
		{[]string{"-replot", "somewhere", "-procs", "2"}, "-procs"},
		{[]string{"-limit", "0"}, "-limit 0"},
		{[]string{"-limit", "1025"}, "-limit 1025"},
		{[]string{"-backend", "redis", "-locks", "leasehold,redislock", "-limit", "2"}, "-locks redislock"},
		{[]string{"-scale", "10", "-limit", "2"}, "-limit"},
		{[]string{"-replot", "somewhere", "-limit", "2"}, "-limit"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		var errOut bytes.Buffer
		_, err := parseFlags(tc.args, &errOut)
		if err == nil {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %q does not name %s", tc.args, err, tc.want)
		}
	}
}

// Above a limit of 1 the peers, which have no semaphore, leave the default
// contenders, and the output says so.
func TestLimitLeavesPeersOut(t *testing.T) {
	var errOut bytes.Buffer
	f, err := parseFlags([]string{"-backend", "redis", "-limit", "2"}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.locks, []string{lockLeasehold}) {
		t.Errorf("contenders %v, want leasehold alone", f.locks)
	}
	if note := leftOutNote(backendRedis, 2); !strings.Contains(note, "redislock and redsync have no semaphore") {
		t.Errorf("note %q", note)
	}
	if note := leftOutNote(backendRedis, 1); note != "" {
		t.Errorf("limit 1: note %q", note)
	}
	f, err = parseFlags([]string{"-backend", "redis"}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.locks, []string{lockLeasehold, lockRedislock, lockRedsync}) {
		t.Errorf("limit 1: contenders %v", f.locks)
	}
}

// A short -limit 3 run on memory: several holders at once and none beyond
// three, the semaphore's measures in the table, results.json and the
// charts.
func TestCLILimitRun(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"-limit", "3", "-inprocess", "-quiet", "-goroutines", "6", "-duration", "400ms", "-report", dir}
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	table := out.String()
	for _, want := range []string{"one hot name, limit 3,", "util", "RT/grant", "Limit 3: hand-off", "0 token-order violations"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "vs") {
		t.Errorf("a \"vs leasehold\" column without a peer:\n%s", table)
	}
	for _, l := range strings.Split(table, "\n") {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("a line of %d columns: %q", n, l)
		}
		if strings.TrimRight(l, " ") != l {
			t.Errorf("trailing blanks: %q", l)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j jsonReport
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(j.Runs))
	}
	r := j.Runs[0]
	if r.Limit != 3 || r.Safety.Overlaps != 0 || r.Safety.Rejections != 0 {
		t.Fatalf("limit %d, safety %+v", r.Limit, r.Safety)
	}
	// One holder at a time would be a utilisation of 1/3 at most.
	if len(r.Utilisation) != 1 || r.Utilisation[0] <= 1.0/3 || r.Utilisation[0] > 1 {
		t.Errorf("utilisation %v: want several holders at once, within the limit", r.Utilisation)
	}
	if r.HandOff.N == 0 || r.Acquisitions == 0 || r.RoundTripsPerAcq == 0 {
		t.Errorf("%d hand-offs, %d grants, %.2f round trips per grant", r.HandOff.N, r.Acquisitions, r.RoundTripsPerAcq)
	}
	if s := j.Summaries[0]; s.Limit != 3 || s.Utilisation == nil {
		t.Errorf("summary: limit %d, utilisation %v", s.Limit, s.Utilisation)
	}
	for _, c := range []string{chartThroughput, chartFairness, chartSafety} {
		if _, err := os.Stat(filepath.Join(dir, c)); err != nil {
			t.Error(err)
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"-replot", dir}, &out, &errOut); code != exitOK {
		t.Fatalf("-replot: exit %d: %s", code, errOut.String())
	}
	if out.String() != table {
		t.Errorf("-replot prints another table:\n%s\nwant:\n%s", out.String(), table)
	}
}

// The checker's self-test under a limit: the unsafe lock's n slots, each
// taken by check, then set, let more than n hold at once, and the CLI
// exits 1.
func TestCLILimitCatchesUnsafeSemaphore(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-locks", "unsafe", "-limit", "2", "-goroutines", "6", "-inprocess", "-quiet", "-duration", "200ms"}, &out, &errOut)
	if code != exitUnsafe {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitUnsafe, errOut.String())
	}
	if !strings.Contains(out.String(), "beyond the limit of 2") || !strings.Contains(errOut.String(), "beyond the limit of 2") {
		t.Errorf("the failure is not called out:\n%s\n%s", out.String(), errOut.String())
	}
}

// A sweep whose later run is impossible fails before its first run: no
// progress, no table, and the message names the flag.
func TestCLIRefusesBeforeRunning(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-procs", "1,2", "-inprocess", "-duration", "50ms"}, &out, &errOut)
	if code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	if out.Len() != 0 || strings.Contains(errOut.String(), "acquisitions") {
		t.Errorf("something ran before the refusal:\nstdout: %s\nstderr: %s", out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "-procs 2") || !strings.Contains(errOut.String(), "-h lists the flags") {
		t.Errorf("stderr: %s", errOut.String())
	}
}

// -h starts with a synopsis, then two command lines to copy, then the flags.
func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	help := errOut.String()
	if !strings.HasPrefix(help, "Usage: go -C bench run . [flags]") {
		t.Errorf("-h does not start with the synopsis:\n%s", help)
	}
	head, _, ok := strings.Cut(help, "Flags:")
	if !ok {
		t.Fatalf("no flags in -h:\n%s", help)
	}
	if n := strings.Count(head, "\n  go -C bench run ."); n != 2 {
		t.Errorf("%d example command lines before the flags, want 2:\n%s", n, head)
	}
	for _, l := range strings.Split(head, "\n") {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
}

// testRuns is a sweep's worth of results with wide values: long lock names,
// large counts and latencies.
func testRuns() []*runResult {
	mk := func(lock string, perSec, acqP50, acqP99, hoP50, hoP99 float64, overlaps int) *runResult {
		r := &runResult{Lock: lock, Backend: backendRedis, Procs: 16, Goroutines: 64, Contenders: 1024, Keys: 1, Dist: "hot",
			HoldMs: 1, TTLMs: 5000, Wait: "forever", Seconds: 10, PerSecond: perSec,
			Acquire: latency{N: 10, P50: acqP50, P90: acqP99, P99: acqP99, Max: acqP99},
			HandOff: latency{N: 10, P50: hoP50, P99: hoP99}, Peer: lock != lockLeasehold && lock != lockUnsafe}
		r.Fairness.Jain = 0.874
		r.Safety.Overlaps = overlaps
		if overlaps > 0 {
			r.Safety.OverlapSamples = []overlap{{Key: 0, WorkerA: 1, WorkerB: 2}}
		}
		return r
	}
	return []*runResult{
		mk(lockLeasehold, 123456, 1234.5, 12345.6, 0.5, 123.4, 0),
		mk(lockRedislock, 61728, 0.123, 99999, 1.5, 1234.5, 12345),
		mk(lockPGLock, 246912, 123.4, 98765, 0.25, 0.5, 0),
	}
}

// The default table fits a terminal of 100 columns, even with wide values
// and a long peer name.
func TestTableFits100Columns(t *testing.T) {
	var out bytes.Buffer
	if err := writeTable(&out, testRuns()); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	if t.Failed() {
		t.Log("\n" + out.String())
	}
}

// A peer's "vs leasehold" cells describe the peer: its throughput and median
// hand-off as multiples of leasehold's; leasehold's row is the base.
func TestVersusCellsDescribeTheirRow(t *testing.T) {
	rs := testRuns()
	ss := summarizeRuns(rs)
	for _, tc := range []struct {
		s            *summary
		thr, handoff string
	}{
		{ss[0], "base", "base"},
		{ss[1], "0.50×", "3.00×"}, // half the acquisitions, a hand-off three times as long
		{ss[2], "2.00×", "0.50×"},
	} {
		thr, handoff := versusCells(ss, tc.s)
		if thr != tc.thr || handoff != tc.handoff {
			t.Errorf("%s: vs leasehold %s, %s; want %s, %s", tc.s.Lock, thr, handoff, tc.thr, tc.handoff)
		}
	}
	var out bytes.Buffer
	if err := writeTable(&out, rs); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) == 9 && f[0] == lockRedislock {
			if f[len(f)-2] != "0.50×" || f[len(f)-1] != "3.00×" {
				t.Errorf("redislock's row ends %q", f[len(f)-2:])
			}
		}
	}
}

// A progress stream that is not a terminal gets no carriage returns or
// escape sequences, only a plain line per run.
func TestProgressPlainOffTerminal(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-inprocess", "-duration", "100ms", "-goroutines", "2"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for name, s := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
		if strings.ContainsAny(s, "\r\033") {
			t.Errorf("%s has control characters: %q", name, s)
		}
	}
	if !strings.Contains(errOut.String(), "leasehold 1×2: ") || !strings.Contains(errOut.String(), " acquisitions\n") {
		t.Errorf("no plain progress line: %q", errOut.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Error("a pipe or a buffer taken for a terminal")
	}
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to check the positive case: %v", err)
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Error("a pseudo-terminal not taken for a terminal")
	}
}
