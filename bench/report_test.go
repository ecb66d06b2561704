package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func TestFitAxis(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }
	for _, tc := range []struct {
		name     string
		lo, hi   float64
		want     axisFit
		wantNear bool
	}{
		// Hand-offs from 0.3 to 1.1 ms: linear, 8% of the span either
		// side, no decade of padding above.
		{"small range", 0.3, 1.1, axisFit{Min: 0.3 - 0.064, Max: 1.1 + 0.064}, true},
		// Throughput 360 to 680: linear, from the data, not from zero.
		{"far from zero", 360, 680, axisFit{Min: 360 - 25.6, Max: 680 + 25.6}, true},
		// The margin would cross zero: the axis stops at zero.
		{"near zero", 0.05, 0.9, axisFit{Min: 0, Max: 0.9 + 0.068}, true},
		{"from zero", 0, 1, axisFit{Min: 0, Max: 1.08}, true},
		// 0.02 to 50 ms spans more than logSpan: log, with the margin
		// taken in decades.
		{"wide range", 0.02, 50, axisFit{Min: math.Pow(10, math.Log10(0.02)-0.08*math.Log10(2500)),
			Max: math.Pow(10, math.Log10(50)+0.08*math.Log10(2500)), Log: true}, true},
		{"one value", 4, 4, axisFit{Min: 3.6, Max: 4.4}, true},
		{"zero", 0, 0, axisFit{Min: 0, Max: 1}, true},
		{"negative", -2, 2, axisFit{Min: -2.32, Max: 2.32}, true},
		{"swapped", 1.1, 0.3, axisFit{Min: 0.3 - 0.064, Max: 1.1 + 0.064}, true},
	} {
		got := fitAxis(tc.lo, tc.hi)
		if got.Log != tc.want.Log || !near(got.Min, tc.want.Min) || !near(got.Max, tc.want.Max) {
			t.Errorf("%s: fitAxis(%g, %g) = %+v, want %+v", tc.name, tc.lo, tc.hi, got, tc.want)
		}
		if got.Min > math.Min(tc.lo, tc.hi) || got.Max < math.Max(tc.lo, tc.hi) {
			t.Errorf("%s: %+v does not hold the data", tc.name, got)
		}
	}
}

// A short log axis still has labels: 1, 2 and 5 times the powers of ten.
func TestLogTicks(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks{}).Ticks(0.15, 3.5) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "0.2 0.5 1 2" {
		t.Errorf("labels %q, want 0.2 0.5 1 2", got)
	}
}

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want spread
	}{
		{nil, spread{}},
		{[]float64{7}, spread{Median: 7, Min: 7, Max: 7, N: 1}},
		{[]float64{3, 1, 2}, spread{Median: 2, Min: 1, Max: 3, N: 3}},
		{[]float64{4, 1, 3, 2}, spread{Median: 2.5, Min: 1, Max: 4, N: 4}}, // the middle two's mean
	} {
		if got := spreadOf(tc.vs); got != tc.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", tc.vs, got, tc.want)
		}
	}
	vs := []float64{3, 1, 2}
	spreadOf(vs)
	if vs[0] != 3 {
		t.Error("spreadOf sorted its argument in place")
	}
}

// synthRun is one run of a synthetic record set.
func synthRun(lock string, procs, rep int, perSec, hoP50, hoP99, rtPerAcq, cpu float64, shares []float64) *runResult {
	r := &runResult{Lock: lock, Backend: backendRedis, Procs: procs, Goroutines: 4, Contenders: procs * 4, Keys: 1, Dist: "hot",
		Rep: rep, HoldMs: 1, TTLMs: 5000, Wait: "forever", Seconds: 10, PerSecond: perSec, Acquisitions: int(perSec * 10),
		Acquire: latency{N: 10, P50: 5, P90: 9, P99: 12, Max: 20}, HandOff: latency{N: 10, P50: hoP50, P99: hoP99},
		RoundTripsPerAcq: rtPerAcq, CPUSeconds: cpu, Peer: isPeer(lock), Shares: shares, Failures: map[string]uint64{}}
	r.Fairness = jain(shares)
	if r.Peer {
		r.Handoffs = &handoffCounts{}
	}
	return r
}

// evenShares are n shares around 1, the first low by dip.
func evenShares(n int, dip float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 1 + dip/float64(n-1)
	}
	s[0] = 1 - dip
	return s
}

// synthSweep is leasehold and redislock at 1×4 and 4×4, three runs each,
// leasehold meeting every target at 1×4 and missing the hand-off p99 and
// throughput at 4×4; redislock unfair.
func synthSweep() []*runResult {
	var rs []*runResult
	for rep := 1; rep <= 3; rep++ {
		d := float64(rep-2) * 0.05 // the runs differ a little
		lh1 := synthRun(lockLeasehold, 1, rep, 900*(1+d), 0.2+d/10, 0.8+d, 2.2, 1.0, evenShares(4, 0.05))
		lh1.Handoffs = &handoffCounts{Notice: 8900, Poll: uint64(rep)}
		lh4 := synthRun(lockLeasehold, 4, rep, 700*(1+d), 0.24+d/10, 1.6+d, 2.4, 1.4, evenShares(16, 0.1))
		lh4.Handoffs = &handoffCounts{Notice: 6900, Poll: 10 + uint64(rep)}
		rs = append(rs,
			lh1, synthRun(lockRedislock, 1, rep, 600*(1-d), 0.3, 1.4, 2.0, 1.0, evenShares(4, 0.3)),
			lh4, synthRun(lockRedislock, 4, rep, 610*(1-d), 0.35, 2.8, 2.5, 1.2, evenShares(16, 0.8)),
		)
	}
	return rs
}

// Repeated runs are summarised by configuration: the median and the
// lowest and highest run; safety counts and fallback wakes are totals.
func TestSummarizeRepeats(t *testing.T) {
	ss := summarizeRuns(synthSweep())
	if len(ss) != 4 {
		t.Fatalf("%d configurations, want 4", len(ss))
	}
	lh := ss[0]
	if lh.Lock != lockLeasehold || lh.Procs != 1 || lh.Runs != 3 {
		t.Fatalf("first configuration %s %d×%d, %d runs", lh.Lock, lh.Procs, lh.Goroutines, lh.Runs)
	}
	if lh.PerSecond.Median != 900 || math.Abs(lh.PerSecond.Min-855) > 1e-9 || math.Abs(lh.PerSecond.Max-945) > 1e-9 {
		t.Errorf("throughput %+v, want 900 within 855–945", lh.PerSecond)
	}
	if lh.FallbackWakes == nil || *lh.FallbackWakes != 1+2+3 {
		t.Errorf("fallback wakes %v, want 6 over the runs", lh.FallbackWakes)
	}
	if ss[1].FallbackWakes == nil || *ss[1].FallbackWakes != 0 {
		t.Errorf("a peer's fallback wakes %v, want 0", ss[1].FallbackWakes)
	}
	if len(lh.Shares) != 4 || math.Abs(lh.Shares[0].Median-0.95) > 1e-9 {
		t.Errorf("shares by rank %+v, want 4 ranks, the smallest 0.95", lh.Shares)
	}
	rs := synthSweep()
	rs[0].Handoffs = nil // one run without the counter: n/a
	if ss := summarizeRuns(rs); ss[0].FallbackWakes != nil {
		t.Errorf("fallback wakes %d although a run did not count them", *ss[0].FallbackWakes)
	}
}

func TestVerdict(t *testing.T) {
	vs := verdicts(summarizeRuns(synthSweep()))
	if len(vs) != 2 {
		t.Fatalf("%d verdicts, want one per leasehold configuration", len(vs))
	}
	met, missed := vs[0], vs[1]
	if !met.Met || !strings.HasSuffix(met.Line, "— meets the hand-off targets") {
		t.Errorf("1×4: %s", met.Line)
	}
	if !strings.HasPrefix(met.Line, "leasehold 1×4: 1.50× the better peer's throughput (redislock), hand-off p50 0.200 / p99 0.800 ms, 0 overlaps") {
		t.Errorf("1×4 line: %s", met.Line)
	}
	if missed.Met {
		t.Fatalf("4×4 met: %s", missed.Line)
	}
	if !strings.HasSuffix(missed.Line, "1.15× the better peer's throughput (redislock), hand-off p50 0.240 / p99 1.60 ms, 0 overlaps — misses throughput, hand-off p99") {
		t.Errorf("4×4 line: %s", missed.Line)
	}
	for _, c := range missed.Checks {
		if c.Name == "throughput" && (c.Met || c.Got != "1.15× redislock's" || c.Want != "≥ 1.3×") {
			t.Errorf("throughput check %+v", c)
		}
		if c.Name == "hand-off p99" && (c.Met || c.Got != "1.60 ms" || c.Want != "≤ 1 ms") {
			t.Errorf("hand-off p99 check %+v", c)
		}
		if c.Name == "hand-off p50" && !c.Met {
			t.Errorf("hand-off p50 0.24 ms judged missed: %+v", c)
		}
		if c.Name == "CPU per grant" && !c.Met {
			// 1.4 s for 7000 grants against redislock's 1.2 s for 6100.
			t.Errorf("CPU per grant judged missed: %+v", c)
		}
	}

	// Every target on its own: each broken one is named.
	base := func() (*summary, []*summary) {
		ss := summarizeRuns(synthSweep())
		return ss[0], []*summary{ss[1]}
	}
	for _, tc := range []struct {
		name  string
		bend  func(*summary)
		wants string
	}{
		{"round trips", func(s *summary) { s.RoundTripsPerAcq.Median = 2.6 }, "— misses round trips 2.60/grant"},
		{"jain", func(s *summary) { s.Jain.Median = 0.97 }, "— misses Jain 0.970"},
		{"smallest share", func(s *summary) { s.MinShare.Median = 0.79 }, "— misses smallest share 0.79"},
		{"cpu", func(s *summary) { s.CPUMsPerGrant.Median *= 3 }, "— misses CPU per grant 2.00× redislock's"},
		{"p50", func(s *summary) { s.HandOffP50.Median = 0.26 }, "p50 0.260 / p99 0.800 ms, 0 overlaps — misses hand-off p50"},
		{"overlaps", func(s *summary) { s.Overlaps = 1 }, "1 overlap — misses overlaps"},
		{"fencing", func(s *summary) { s.Rejections = 2 }, "— misses 2 fencing refusals"},
	} {
		lh, peers := base()
		tc.bend(lh)
		v := judge(lh, peers)
		if v.Met || !strings.Contains(v.Line, tc.wants) {
			t.Errorf("%s: %s", tc.name, v.Line)
		}
	}

	// No peer at this procs×g: throughput and CPU are not judged, and the
	// verdict says so rather than claiming the targets.
	lh, _ := base()
	v := judge(lh, nil)
	if v.Met || !strings.Contains(v.Line, "no peer to compare with") ||
		!strings.HasSuffix(v.Line, "meets the targets it could judge (not judged: throughput, CPU per grant)") {
		t.Errorf("without a peer: %s", v.Line)
	}
}

func TestWorkloadWording(t *testing.T) {
	for _, tc := range []struct {
		keys  int
		dist  string
		zipfS float64
		want  string
	}{
		{1, "hot", 0, "one hot name"},
		{1, "uniform", 0, "one hot name"},
		{16, "hot", 0, "one hot name"},
		{16, "uniform", 0, "16 names, uniform"},
		{16, "zipf", 1.2, "16 names, zipf s=1.2"},
	} {
		if got := workload(&runResult{Keys: tc.keys, Dist: tc.dist, ZipfS: tc.zipfS}); got != tc.want {
			t.Errorf("%d %s: %q, want %q", tc.keys, tc.dist, got, tc.want)
		}
	}
}

// The table of repeated runs shows medians, then the spread, then a
// verdict per leasehold configuration and its fallback wakes, in 100
// columns.
func TestTableOfRepeatedRuns(t *testing.T) {
	var out bytes.Buffer
	if err := writeTable(&out, synthSweep()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"backend redis, one hot name, hold 1ms", "Each row: the median of 3 runs",
		"Spread over the runs (lowest–highest):", "855–945",
		"Targets: throughput ≥ 1.3× the better peer's; hand-off p50 ≤ 0.25 ms, p99 ≤ 1 ms;",
		"leasehold 1×4: 1.50× the better peer's throughput", "meets the hand-off targets",
		"1×4 6, 4×4 36",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if strings.Contains(s, "name(s)") {
		t.Error(`table says "name(s)"`)
	}
	for _, l := range strings.Split(s, "\n") {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	if t.Failed() {
		t.Log("\n" + s)
	}
}

// -replot draws every chart from a results.json of synthetic runs, through
// the CLI, and prints the table with the verdicts.
func TestReplotDrawsCharts(t *testing.T) {
	dir := t.TempDir()
	b, err := json.Marshal(report(synthSweep()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-replot", dir}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "Targets: ") || !strings.Contains(out.String(), "— meets the hand-off targets") {
		t.Errorf("no verdict in the table:\n%s", out.String())
	}
	for _, name := range []string{chartThroughput, chartHandOff, chartHandOffP99, chartFairness, chartSafety} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 150 {
			t.Errorf("%s is %v", name, b)
		}
	}
	if d := os.Getenv("BENCH_CHART_DIR"); d != "" {
		// To look at the charts: BENCH_CHART_DIR=/some/dir go test -run TestReplotDrawsCharts
		for _, name := range []string{chartThroughput, chartHandOff, chartHandOffP99, chartFairness, chartSafety} {
			b, _ := os.ReadFile(filepath.Join(dir, name))
			_ = os.WriteFile(filepath.Join(d, name), b, 0o644)
		}
	}
}

// A results.json from before shares and repetitions (one run each, no
// Shares, no Handoffs) still replots: no fairness chart, n/a fallback.
func TestReplotOldRecords(t *testing.T) {
	dir := t.TempDir()
	rs := synthSweep()[:4]
	for _, r := range rs {
		r.Rep, r.Shares, r.Handoffs = 0, nil, nil
	}
	b, err := json.Marshal(jsonReport{Runs: rs})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-replot", dir}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(dir, chartFairness)); !os.IsNotExist(err) {
		t.Errorf("a fairness chart without shares: %v", err)
	}
	for _, name := range []string{chartThroughput, chartHandOff, chartSafety} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "1×4 n/a, 4×4 n/a") {
		t.Errorf("no n/a fallback wakes:\n%s", out.String())
	}
}

// readHandoffs sums the engine's counter by its "via" attribute, through
// the SDK's ManualReader, and tells an absent counter (nil) from zero.
func TestReadHandoffs(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	p := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithView(onlyHandoffs))
	defer p.Shutdown(ctx)
	m := p.Meter("github.com/leasehold/leasehold")
	other, err := m.Int64Counter("leasehold.renewals")
	if err != nil {
		t.Fatal(err)
	}
	other.Add(ctx, 5)
	if h, err := readHandoffs(ctx, reader); err != nil || h != nil {
		t.Fatalf("no hand-off counter: %+v, %v; want nil", h, err)
	}
	c, err := m.Int64Counter(handoffsMetric)
	if err != nil {
		t.Fatal(err)
	}
	c.Add(ctx, 7, metric.WithAttributes(attribute.String(handoffsViaAttr, handoffViaNote)))
	c.Add(ctx, 2, metric.WithAttributes(attribute.String(handoffsViaAttr, handoffViaPoll)))
	c.Add(ctx, 1, metric.WithAttributes(attribute.String(handoffsViaAttr, handoffViaPoll)))
	h, err := readHandoffs(ctx, reader)
	if err != nil || h == nil || h.Notice != 7 || h.Poll != 3 {
		t.Fatalf("hand-offs %+v, %v; want 7 by notice, 3 by poll", h, err)
	}
}
