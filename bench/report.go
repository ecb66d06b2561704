package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// baseline finds the leasehold run with the same number of processes as r,
// in the same repetition, to compare a peer against.
func baseline(all []*runResult, r *runResult) *runResult {
	for _, b := range all {
		if b.Lock == lockLeasehold && b.Procs == r.Procs && b.Goroutines == r.Goroutines && b.Rep == r.Rep {
			return b
		}
	}
	return nil
}

// ratios compares r with leasehold's run at the same contention: leasehold's
// throughput over r's and r's median hand-off over leasehold's (so >1 means
// leasehold is better on both).
func ratios(all []*runResult, r *runResult) (thr, handoff float64, ok bool) {
	b := baseline(all, r)
	if b == nil || b == r || r.PerSecond == 0 || b.HandOff.N == 0 || r.HandOff.N == 0 {
		return 0, 0, false
	}
	return b.PerSecond / r.PerSecond, r.HandOff.P50 / b.HandOff.P50, true
}

// baselineSummary finds leasehold's configuration at s's procs×g.
func baselineSummary(all []*summary, s *summary) *summary {
	for _, b := range all {
		if b.Lock == lockLeasehold && b.Procs == s.Procs && b.Goroutines == s.Goroutines {
			return b
		}
	}
	return nil
}

func writeResults(w io.Writer, format string, rs []*runResult) error {
	switch format {
	case "json":
		return writeJSON(w, rs)
	case "csv":
		return writeCSV(w, rs)
	}
	return writeTable(w, rs)
}

// jsonReport is the JSON output and results.json.
type jsonReport struct {
	// Runs are every run, each repetition on its own; the rest is derived
	// from them (-replot reads Runs only).
	Runs []*runResult
	// Versus holds each peer's ratios to leasehold at the same contention,
	// run by run (repetition by repetition).
	Versus []versus
	// Summaries are each lock at each procs×g over its repetitions.
	Summaries []*summary
	// Verdicts judge leasehold against the hand-off targets (verdict.go).
	Verdicts []verdict
}

type versus struct {
	Lock                     string
	Procs, Goroutines        int
	LeaseholdThroughputTimes float64 // leasehold's acquisitions/s ÷ the peer's
	PeerHandOffTimes         float64 // the peer's median hand-off ÷ leasehold's
}

func report(rs []*runResult) jsonReport {
	ss := summarizeRuns(rs)
	j := jsonReport{Runs: rs, Summaries: ss, Verdicts: verdicts(ss)}
	for _, r := range rs {
		if t, h, ok := ratios(rs, r); ok {
			j.Versus = append(j.Versus, versus{r.Lock, r.Procs, r.Goroutines, t, h})
		}
	}
	return j
}

func writeJSON(w io.Writer, rs []*runResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report(rs))
}

var csvHeader = []string{"lock", "backend", "procs", "goroutines", "keys", "dist", "hold_ms", "think_ms", "ttl_ms", "wait", "seconds",
	"acquisitions", "per_second", "acquire_p50_ms", "acquire_p90_ms", "acquire_p99_ms", "acquire_max_ms",
	"handoffs", "handoff_p50_ms", "handoff_p99_ms", "queued_handoffs", "queued_handoff_p50_ms", "queued_handoff_p99_ms", "jain", "min_share", "max_share",
	"wake_notify", "wake_poll", "round_trips_per_acq", "overlaps", "fence_rejections", "failures",
	"cpu_s", "max_rss_mib", "leasehold_throughput_x", "peer_handoff_x", "rep", "notice_handoffs", "fallback_wakes"}

// csvLimitHeader are the columns a CSV of runs of limit above 1 adds:
// the limit, and name 0's utilisation (see utilisation).
var csvLimitHeader = []string{"limit", "utilisation_name0"}

func writeCSV(w io.Writer, rs []*runResult) error {
	cw := csv.NewWriter(w)
	limited := slices.ContainsFunc(rs, func(r *runResult) bool { return r.limit() > 1 })
	if limited {
		_ = cw.Write(append(slices.Clone(csvHeader), csvLimitHeader...))
	} else {
		_ = cw.Write(csvHeader)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range rs {
		t, h, ok := ratios(rs, r)
		ts, hs := "", ""
		if ok {
			ts, hs = f(t), f(h)
		}
		notice, fallback := "", "" // not counted
		if r.Handoffs != nil {
			notice, fallback = strconv.FormatUint(r.Handoffs.Notice, 10), strconv.FormatUint(r.Handoffs.Poll, 10)
		}
		row := []string{r.Lock, r.Backend, strconv.Itoa(r.Procs), strconv.Itoa(r.Goroutines), strconv.Itoa(r.Keys), r.Dist,
			f(r.HoldMs), f(r.ThinkMs), f(r.TTLMs), r.Wait, f(r.Seconds), strconv.Itoa(r.Acquisitions), f(r.PerSecond),
			f(r.Acquire.P50), f(r.Acquire.P90), f(r.Acquire.P99), f(r.Acquire.Max),
			strconv.Itoa(r.HandOff.N), f(r.HandOff.P50), f(r.HandOff.P99),
			strconv.Itoa(r.WaiterHandOff.N), f(r.WaiterHandOff.P50), f(r.WaiterHandOff.P99),
			f(r.Fairness.Jain), f(r.Fairness.MinShare), f(r.Fairness.MaxShare),
			strconv.FormatUint(r.Wakeups.Notify, 10), strconv.FormatUint(r.Wakeups.Poll, 10), f(r.RoundTripsPerAcq),
			strconv.Itoa(r.Safety.Overlaps), strconv.Itoa(r.Safety.Rejections), failureString(r.Failures),
			f(r.CPUSeconds), f(r.MaxRSSMiB), ts, hs, strconv.Itoa(r.Rep), notice, fallback}
		if limited {
			util := ""
			if len(r.Utilisation) > 0 {
				util = f(r.Utilisation[0])
			}
			row = append(row, strconv.Itoa(r.limit()), util)
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

func failureString(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, "; ")
}

// tableWidth is the widest line the default table writes (its notes are
// wrapped to it), so that it reads in a terminal of 100 columns. The
// columns it leaves out are in -format json and csv.
const tableWidth = 100

// msShort formats milliseconds with about three significant digits.
func msShort(v float64) string {
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// versusCells are the "vs leasehold" cells of s's row: s's own throughput
// and median hand-off as multiples of leasehold's at the same procs×g
// (medians over the runs), so that a row describes its own lock ("base" on
// leasehold's row).
func versusCells(all []*summary, s *summary) (thr, handoff string) {
	b := baselineSummary(all, s)
	switch {
	case b == s:
		return "base", "base"
	case b == nil:
		return "-", "-"
	}
	thr, handoff = "-", "-"
	if b.PerSecond.Median > 0 {
		thr = fmt.Sprintf("%.2f×", s.PerSecond.Median/b.PerSecond.Median)
	}
	if b.HandOffP50.N > 0 && s.HandOffP50.N > 0 && b.HandOffP50.Median > 0 {
		handoff = fmt.Sprintf("%.2f×", s.HandOffP50.Median/b.HandOffP50.Median)
	}
	return thr, handoff
}

// p50p99s formats the medians of a p50 and a p99; "-" when there was none.
func p50p99s(p50, p99 spread) string {
	if p50.N == 0 {
		return "-"
	}
	return msShort(p50.Median) + "/" + msShort(p99.Median)
}

// rangeOf formats a spread as lowest–highest with format.
func rangeOf(s spread, format string) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf(format, s.Min) + "–" + fmt.Sprintf(format, s.Max)
}

// msRange formats a spread of milliseconds as lowest–highest.
func msRange(s spread) string {
	if s.N == 0 {
		return "-"
	}
	return msShort(s.Min) + "–" + msShort(s.Max)
}

// writeTable writes the default output: the measures one compares first,
// under a two-line header (medians when the runs were repeated, then their
// spread), a legend, leasehold's verdicts against the hand-off targets, and
// the runs' notes.
func writeTable(w io.Writer, rs []*runResult) error {
	if len(rs) == 0 {
		return nil
	}
	ss := summarizeRuns(rs)
	runs := maxRuns(ss)
	r0 := rs[0]
	writeWrapped(w, fmt.Sprintf("backend %s, %s%s, hold %gms, think %gms, TTL %gms, wait %s, %.0fs per run",
		r0.Backend, workload(r0), limitWords(r0), r0.HoldMs, r0.ThinkMs, r0.TTLMs, r0.Wait, r0.Seconds))
	if note := leftOutNote(r0.Backend, r0.limit()); note != "" {
		writeWrapped(w, note+".")
	}
	if runs > 1 {
		writeWrapped(w, fmt.Sprintf("Each row: the median of %d runs; their spread follows the table.", runs))
	}
	fmt.Fprintln(w)
	if r0.limit() > 1 {
		if err := writeLimitTable(w, ss, runs); err != nil {
			return err
		}
	} else if err := writeExclusiveTable(w, ss, runs); err != nil {
		return err
	}
	writeNotes(w, rs, ss, runs)
	return nil
}

// writeExclusiveTable is the table of an exclusive lock (-limit 1), with
// the peers beside leasehold, and its legend.
func writeExclusiveTable(w io.Writer, ss []*summary, runs int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\t\t\tacquire ms\thand-off ms\t\t\tvs\tleasehold\t")
	fmt.Fprintln(tw, "lock\tprocs×g\tacq/s\tp50/p99\tp50/p99\tJain\toverlaps\tacq/s\thand-off\t")
	for _, s := range ss {
		thr, handoff := versusCells(ss, s)
		fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%s\t%s\t%.3f\t%d\t%s\t%s\t\n",
			s.Lock, s.Procs, s.Goroutines, s.PerSecond.Median, p50p99s(s.AcquireP50, s.AcquireP99), p50p99s(s.HandOffP50, s.HandOffP99),
			s.Jain.Median, s.Overlaps, thr, handoff)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if runs > 1 {
		fmt.Fprintf(w, "\nSpread over the runs (lowest–highest):\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "lock\tprocs×g\truns\tacq/s\thand-off p50 ms\thand-off p99 ms\tJain\t")
		for _, s := range ss {
			fmt.Fprintf(tw, "%s\t%d×%d\t%d\t%s\t%s\t%s\t%s\t\n", s.Lock, s.Procs, s.Goroutines, s.Runs,
				rangeOf(s.PerSecond, "%.0f"), msRange(s.HandOffP50), msRange(s.HandOffP99), rangeOf(s.Jain, "%.3f"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if len(ss) > 1 {
		writeWrapped(w, "vs leasehold: this row's acq/s and median hand-off ÷ leasehold's at the same procs×g.")
	}
	writeWrapped(w, "More measures (p90/max, queued hand-offs, wake-ups, round trips, CPU, RSS): -format json|csv")
	return nil
}

// writeLimitTable is the table of a semaphore (-limit above 1): no peer
// has one, so no "vs leasehold" columns; the hot name's utilisation and the
// round trips per grant instead. Then its legend.
func writeLimitTable(w io.Writer, ss []*summary, runs int) error {
	n := ss[0].Limit
	util := func(s *summary) spread {
		if s.Utilisation == nil {
			return spread{}
		}
		return *s.Utilisation
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\t\t\tacquire ms\thand-off ms\t")
	fmt.Fprintln(tw, "lock\tprocs×g\tacq/s\tp50/p99\tp50/p99\tJain\tutil\tRT/grant\toverlaps\t")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%s\t%s\t%.3f\t%s\t%s\t%d\t\n",
			s.Lock, s.Procs, s.Goroutines, s.PerSecond.Median, p50p99s(s.AcquireP50, s.AcquireP99), p50p99s(s.HandOffP50, s.HandOffP99),
			s.Jain.Median, medianOf(util(s), "%.2f"), medianOf(s.RoundTripsPerAcq, "%.2f"), s.Overlaps)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if runs > 1 {
		fmt.Fprintf(w, "\nSpread over the runs (lowest–highest):\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "lock\tprocs×g\truns\tacq/s\thand-off p50 ms\thand-off p99 ms\tJain\tutil\t")
		for _, s := range ss {
			fmt.Fprintf(tw, "%s\t%d×%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", s.Lock, s.Procs, s.Goroutines, s.Runs,
				rangeOf(s.PerSecond, "%.0f"), msRange(s.HandOffP50), msRange(s.HandOffP99), rangeOf(s.Jain, "%.3f"), rangeOf(util(s), "%.2f"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	writeWrapped(w, fmt.Sprintf("Limit %d: hand-off is a release of a slot of a full name (%d holders, or slots on their way "+
		"to waiters) to the next grant of that name, while a contender waited. util: name 0's time-averaged "+
		"holders ÷ %d. RT/grant: store round trips per grant. overlaps: holdings that began while %d were live.", n, n, n, n))
	writeWrapped(w, "More measures (p90/max, queued hand-offs, wake-ups, CPU, RSS, each name's utilisation): -format json|csv")
	return nil
}

// medianOf formats a spread's median with format; "-" when there was none.
func medianOf(s spread, format string) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf(format, s.Median)
}

// limitWords is ", limit n" for a run of limit above 1 (up to n holders of
// a name at once), else "".
func limitWords(r *runResult) string {
	if r.limit() > 1 {
		return fmt.Sprintf(", limit %d", r.limit())
	}
	return ""
}

// writeNotes writes what follows either table: leasehold's verdicts, its
// fallback wakes, and each run's failures, errors, chaos and safety
// findings.
func writeNotes(w io.Writer, rs []*runResult, ss []*summary, runs int) {
	if vs := verdicts(ss); len(vs) > 0 {
		fmt.Fprintln(w)
		writeWrapped(w, targetsLine(rs[0].limit()))
		for _, v := range vs {
			writeWrapped(w, v.Line)
		}
	}
	var fallback []string
	for _, s := range ss {
		if s.Lock != lockLeasehold {
			continue
		}
		n := "n/a"
		if s.FallbackWakes != nil {
			n = fmt.Sprint(*s.FallbackWakes)
		}
		fallback = append(fallback, fmt.Sprintf("%d×%d %s", s.Procs, s.Goroutines, n))
	}
	if len(fallback) > 0 {
		writeWrapped(w, "leasehold's fallback wakes (grants a waiter took by its own poll, not by a hand-off notice; "+
			"n/a: not counted by the engine): "+strings.Join(fallback, ", "))
	}
	for _, r := range rs {
		id := fmt.Sprintf("%s %d×%d", r.Lock, r.Procs, r.Goroutines)
		if runs > 1 {
			id += fmt.Sprintf(" run %d", r.Rep)
		}
		if len(r.Failures) > 0 {
			writeWrapped(w, id+" failures and losses: "+failureString(r.Failures))
		}
		for _, e := range r.Errors {
			writeWrapped(w, id+" error: "+e)
		}
		for _, c := range r.Chaos {
			writeWrapped(w, id+" chaos: "+c)
		}
		if len(r.Killed) > 0 {
			writeWrapped(w, fmt.Sprintf("%s: processes %v were killed by chaos; their holdings are neither checked nor counted", id, r.Killed))
		}
		verdict := "FAILURE"
		if r.Peer {
			verdict = "finding"
		}
		switch {
		case r.Safety.Overlaps > 0 && r.limit() > 1:
			writeWrapped(w, fmt.Sprintf("%s SAFETY %s: %d holdings beyond the limit of %d (each began while %d were live), e.g. %+v",
				id, verdict, r.Safety.Overlaps, r.limit(), r.limit(), r.Safety.OverlapSamples[0]))
		case r.Safety.Overlaps > 0:
			writeWrapped(w, fmt.Sprintf("%s SAFETY %s: %d overlapping holdings, e.g. %+v", id, verdict, r.Safety.Overlaps, r.Safety.OverlapSamples[0]))
		}
		if r.Safety.Rejections > 0 && r.limit() > 1 {
			writeWrapped(w, fmt.Sprintf("%s TOKEN ORDER %s: %d holdings whose token was not above every token granted before "+
				"their acquire, or repeated one, e.g. %+v", id, verdict, r.Safety.Rejections, r.Safety.RejectSamples[0]))
		}
	}
}

// writeWrapped writes text as lines of at most tableWidth columns, broken
// at spaces (a longer word stays whole), continuation lines indented.
func writeWrapped(w io.Writer, text string) {
	const indent = "    "
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > tableWidth:
			fmt.Fprintln(w, line)
			line = indent + word
		default:
			line += " " + word
		}
	}
	fmt.Fprintln(w, line)
}
