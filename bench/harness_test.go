package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/faultproxy"
	goredis "github.com/redis/go-redis/v9"
)

// When the exec launcher starts this test binary as a worker ("-worker"), it
// serves as one, before the testing package looks at the arguments.
func init() {
	if len(os.Args) == 2 && os.Args[1] == "-worker" {
		if err := runWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	}
}

// testRedisAddr is LEASEHOLD_REDIS_ADDR (default 127.0.0.1:6379); the test
// is skipped when nothing answers there, or fails with
// LEASEHOLD_REQUIRE_SERVICES=1.
func testRedisAddr(t *testing.T) string {
	t.Helper()
	addr := envOr("LEASEHOLD_REDIS_ADDR", "127.0.0.1:6379")
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatalf("no Redis at %s: %v", addr, err)
		}
		t.Skipf("no Redis at %s: %v; set LEASEHOLD_REQUIRE_SERVICES=1 to fail instead", addr, err)
	}
	return addr
}

// testConfig is a short run of lock on backend.
func testConfig(t *testing.T, backend, lock string, procs, goroutines int, d time.Duration) runConfig {
	c := runConfig{
		Backend: backend, Lock: lock, Procs: procs, Goroutines: goroutines, Keys: 1, Dist: "hot",
		Hold: time.Millisecond, TTL: 5 * time.Second, Wait: waitForever, Duration: d,
		Prefix: t.Name() + time.Now().Format("150405.000000000") + ":", Seed: uint64(time.Now().UnixNano()),
	}
	if backend == backendRedis {
		c.RedisAddr = testRedisAddr(t)
	}
	return c
}

func mustRun(t *testing.T, c runConfig, l launcher) *runResult {
	t.Helper()
	r, err := runOne(context.Background(), c, runOptions{launcher: l})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The checker's self-test: a lock that checks, then sets, must be caught
// with overlapping holdings and refused fencing writes.
func TestCheckerCatchesUnsafeLock(t *testing.T) {
	r := mustRun(t, testConfig(t, backendMemory, lockUnsafe, 1, 4, 300*time.Millisecond), inProcessLauncher{})
	if r.Acquisitions == 0 {
		t.Fatal("the unsafe lock was never acquired")
	}
	if r.Safety.Overlaps == 0 {
		t.Fatalf("the checker saw no overlap in %d holdings of a lock with no mutual exclusion", r.Acquisitions)
	}
	if r.Safety.Rejections == 0 {
		t.Errorf("no fencing rejection although tokens are drawn without atomicity")
	}
	if !r.failed() {
		t.Error("an unsafe run is not reported as failed")
	}
}

// The same across OS processes on Redis (GET, then SET): the shared record
// and the monotonic intervals work between processes.
func TestCheckerCatchesUnsafeLockAcrossProcesses(t *testing.T) {
	r := mustRun(t, testConfig(t, backendRedis, lockUnsafe, 2, 2, 500*time.Millisecond), execLauncher{})
	if r.Safety.Overlaps == 0 {
		t.Fatalf("no overlap found in %d holdings of GET-then-SET locking in 2 processes", r.Acquisitions)
	}
}

// The CLI exits non-zero when the checker finds an overlap.
func TestCLIExitsNonZeroOnOverlap(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-locks", "unsafe", "-inprocess", "-quiet", "-duration", "200ms"}, &out, &errOut)
	if code != exitUnsafe {
		t.Fatalf("exit code %d, want %d; stderr: %s", code, exitUnsafe, errOut.String())
	}
	if !strings.Contains(out.String(), "SAFETY FAILURE") {
		t.Errorf("the table does not call out the failure:\n%s", out.String())
	}
}

func TestLeaseholdMemoryRun(t *testing.T) {
	r := mustRun(t, testConfig(t, backendMemory, lockLeasehold, 1, 4, 400*time.Millisecond), inProcessLauncher{})
	if r.Safety.Overlaps != 0 || r.Safety.Rejections != 0 {
		t.Fatalf("leasehold on memory: %+v", r.Safety)
	}
	if r.Acquisitions < 10 || r.HandOff.N == 0 {
		t.Fatalf("%d acquisitions, %d hand-offs: the contenders did not take turns", r.Acquisitions, r.HandOff.N)
	}
	if r.Fairness.Jain <= 0.25 || r.Fairness.Jain > 1 {
		t.Errorf("Jain's index %v out of range for 4 contenders", r.Fairness.Jain)
	}
	if r.RoundTripsPerAcq < 2 {
		t.Errorf("%.2f round trips per acquisition: acquire and release are two at least", r.RoundTripsPerAcq)
	}
	if r.CPUSeconds <= 0 || r.MaxRSSMiB <= 0 {
		t.Errorf("no resource figures: cpu %v, rss %v", r.CPUSeconds, r.MaxRSSMiB)
	}
}

// Leasehold in two worker processes on Redis: no overlap, and waiters are
// handed the name by the store's notices. (Not by release announcements:
// since the waiter queue, a release that hands the name on to a queued
// waiter announces nothing, so how many there are depends on timing.)
func TestLeaseholdRedisProcesses(t *testing.T) {
	r := mustRun(t, testConfig(t, backendRedis, lockLeasehold, 2, 2, time.Second), execLauncher{})
	if r.Safety.Overlaps != 0 || r.Safety.Rejections != 0 {
		t.Fatalf("leasehold on redis: %+v", r.Safety)
	}
	if r.Acquisitions == 0 || r.Handoffs == nil || r.Handoffs.Notice == 0 {
		t.Fatalf("%d acquisitions, hand-offs %+v, wake-ups %+v: expected waiters handed the name by notice", r.Acquisitions, r.Handoffs, r.Wakeups)
	}
	if r.Fairness.MinShare == 0 {
		t.Errorf("a contender never got the name: %+v", r.Fairness)
	}
}

func TestPeersRun(t *testing.T) {
	for _, lock := range []string{lockRedislock, lockRedsync} {
		t.Run(lock, func(t *testing.T) {
			c := testConfig(t, backendRedis, lock, 1, 2, 400*time.Millisecond)
			c.PeerPoll = 5 * time.Millisecond
			r := mustRun(t, c, inProcessLauncher{})
			if r.Acquisitions == 0 || r.RoundTripsPerAcq < 2 {
				t.Fatalf("%s: %d acquisitions, %.2f round trips each", lock, r.Acquisitions, r.RoundTripsPerAcq)
			}
			if r.Safety.Overlaps != 0 {
				t.Errorf("%s overlapped without chaos: %+v", lock, r.Safety.OverlapSamples)
			}
		})
	}
}

// -format json and csv, and -report's results.json and charts.
func TestCLIOutputsAndReport(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"-inprocess", "-quiet", "-duration", "150ms", "-procs", "1", "-goroutines", "2", "-format", "json", "-report", dir}
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var j jsonReport
	if err := json.Unmarshal(out.Bytes(), &j); err != nil || len(j.Runs) != 1 || j.Runs[0].Lock != lockLeasehold {
		t.Fatalf("json output %v: %s", err, out.String())
	}
	for _, f := range []string{"throughput.png", "handoff.png"} {
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		_, err = png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, f := range []string{"throughput.png", "handoff.png"} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	if code := run(context.Background(), []string{"-replot", dir}, &out, &errOut); code != exitOK {
		t.Fatalf("-replot: exit %d: %s", code, errOut.String())
	}
	for _, f := range []string{"throughput.png", "handoff.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("-replot: %v", err)
		}
	}
	out.Reset()
	args = []string{"-inprocess", "-quiet", "-duration", "100ms", "-goroutines", "2", "-format", "csv"}
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "lock,backend,procs") || !strings.HasPrefix(lines[1], "leasehold,memory,1,2") {
		t.Errorf("csv output:\n%s", out.String())
	}
}

// A proxy cut ends the client's connection at once.
func TestProxyCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("x"))
			buf := make([]byte, 1)
			_, _ = c.Read(buf) // until the proxy closes it
			c.Close()
		}
	}()
	p, err := faultproxy.New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	if n := p.CutAll(); n != 1 {
		t.Errorf("cut %d connections, want 1", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Error("the connection survived the cut")
	}
}

// Chaos on the bench's own redis-server: a restart, a cut and a pause all
// happen, and the run is still checked. (Overlaps are not asserted here: they
// are what the run reports; see BENCHMARKS.md.)
func TestChaosRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos takes a few seconds")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatal("no redis-server on PATH")
		}
		t.Skip("no redis-server on PATH")
	}
	f := &cliFlags{base: runConfig{Backend: backendRedis, TTL: 400 * time.Millisecond}, chaos: []string{chaosRestart, chaosCut, chaosPause}}
	cfg := testConfig(t, backendRedis, lockLeasehold, 2, 1, 2500*time.Millisecond)
	cfg.TTL = 400 * time.Millisecond
	plan, cleanup, err := setUpChaos(context.Background(), f, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if cfg.RedisAddr != plan.proxy.Addr() || cfg.RestartGrace != cfg.TTL {
		t.Fatalf("contenders must dial the proxy with a restart grace: %+v", cfg)
	}
	r, err := runOne(context.Background(), cfg, runOptions{launcher: execLauncher{}, chaos: plan})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Chaos) != 3 {
		t.Fatalf("chaos log %q, want 3 actions", r.Chaos)
	}
	for i, want := range []string{"restart: redis-server killed", "cut: ", "pause: process "} {
		if !strings.Contains(r.Chaos[i], want) {
			t.Errorf("chaos %d: %q, want %q", i, r.Chaos[i], want)
		}
	}
	if r.Safety.HoldingsChecked == 0 {
		t.Error("no holding was checked")
	}
}

// -repeat runs each configuration that many times: every run is in the
// records, and the summary takes them together.
func TestCLIRepeat(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"-inprocess", "-quiet", "-duration", "100ms", "-goroutines", "2", "-repeat", "2", "-format", "json"}
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var j jsonReport
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Runs) != 2 || j.Runs[0].Rep != 1 || j.Runs[1].Rep != 2 {
		t.Fatalf("%d runs: %+v", len(j.Runs), j.Runs)
	}
	if len(j.Summaries) != 1 || j.Summaries[0].Runs != 2 || j.Summaries[0].PerSecond.N != 2 {
		t.Errorf("summaries %+v", j.Summaries)
	}
	if len(j.Verdicts) != 1 || j.Verdicts[0].Line == "" {
		t.Errorf("verdicts %+v", j.Verdicts)
	}
}

// A process that reported nothing (killed by chaos) leaves the fairness
// measures: its contenders are gone, not starved.
func TestAnalyseWithoutAKilledProcess(t *testing.T) {
	cfg := runConfig{Lock: lockLeasehold, Backend: backendRedis, Procs: 3, Goroutines: 2, Keys: 1, Dist: "hot", Hold: time.Millisecond, TTL: time.Second}
	ms := int64(time.Millisecond)
	w := func(proc int, ivs ...interval) *workerResult {
		return &workerResult{Proc: proc, Intervals: ivs, Failures: map[string]uint64{}}
	}
	// Processes 0 and 2 reported; contenders 0, 1 (process 0) and 4, 5
	// (process 2) took turns, one grant each.
	results := []*workerResult{
		w(0, interval{Worker: 0, Call: 0, Start: 1 * ms, End: 2 * ms}, interval{Worker: 1, Call: 0, Start: 3 * ms, End: 4 * ms}),
		w(2, interval{Worker: 4, Call: 0, Start: 5 * ms, End: 6 * ms}, interval{Worker: 5, Call: 0, Start: 7 * ms, End: 8 * ms}),
	}
	r := analyse(cfg, results, 0, int64(time.Second))
	if r.Fairness.Jain != 1 || r.Fairness.MinShare != 1 || len(r.Shares) != 4 {
		t.Errorf("fairness %+v, shares %v: want 4 contenders, all even", r.Fairness, r.Shares)
	}
	if r.Handoffs != nil {
		t.Errorf("hand-offs %+v although no worker counted them", r.Handoffs)
	}
}

// Chaos kill, through the command line: a worker process waiting for the
// hot name is killed; the run goes on with the others, its absence is no
// error, and the survivors' holdings are checked.
func TestChaosKill(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos kill runs three worker processes for a second and a half")
	}
	var out, errOut bytes.Buffer
	args := []string{"-backend", "redis", "-redis", testRedisAddr(t), "-locks", "leasehold", "-procs", "3", "-goroutines", "1",
		"-duration", "1500ms", "-ttl", "1s", "-chaos", "kill", "-quiet", "-format", "json"}
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var j jsonReport
	if err := json.Unmarshal(out.Bytes(), &j); err != nil || len(j.Runs) != 1 {
		t.Fatalf("%v: %s", err, out.String())
	}
	r := j.Runs[0]
	if len(r.Chaos) != 1 || !strings.Contains(r.Chaos[0], "kill: process ") {
		t.Fatalf("chaos log %q", r.Chaos)
	}
	t.Logf("%s; %d acquisitions recorded by the survivors, hand-off max %.1f ms", r.Chaos[0], r.Acquisitions, r.HandOff.Max)
	if len(r.Killed) != 1 {
		t.Fatalf("killed %v, want one process", r.Killed)
	}
	if r.Acquisitions == 0 || r.Safety.HoldingsChecked == 0 {
		t.Fatalf("%d acquisitions, %d checked", r.Acquisitions, r.Safety.HoldingsChecked)
	}
	if len(r.Shares) != 2 {
		t.Errorf("%d shares, want the 2 surviving contenders'", len(r.Shares))
	}
	if r.Safety.Overlaps != 0 || len(r.Errors) != 0 {
		t.Errorf("overlaps %d, errors %q", r.Safety.Overlaps, r.Errors)
	}
}
