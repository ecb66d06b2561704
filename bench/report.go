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
// to compare a peer against.
func baseline(all []*runResult, r *runResult) *runResult {
	for _, b := range all {
		if b.Lock == lockLeasehold && b.Procs == r.Procs && b.Goroutines == r.Goroutines {
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
	Runs []*runResult
	// Versus holds each peer's ratios to leasehold at the same contention.
	Versus []versus
}

type versus struct {
	Lock                     string
	Procs, Goroutines        int
	LeaseholdThroughputTimes float64 // leasehold's acquisitions/s ÷ the peer's
	PeerHandOffTimes         float64 // the peer's median hand-off ÷ leasehold's
}

func report(rs []*runResult) jsonReport {
	j := jsonReport{Runs: rs}
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
	"cpu_s", "max_rss_mib", "leasehold_throughput_x", "peer_handoff_x"}

func writeCSV(w io.Writer, rs []*runResult) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(csvHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range rs {
		t, h, ok := ratios(rs, r)
		ts, hs := "", ""
		if ok {
			ts, hs = f(t), f(h)
		}
		_ = cw.Write([]string{r.Lock, r.Backend, strconv.Itoa(r.Procs), strconv.Itoa(r.Goroutines), strconv.Itoa(r.Keys), r.Dist,
			f(r.HoldMs), f(r.ThinkMs), f(r.TTLMs), r.Wait, f(r.Seconds), strconv.Itoa(r.Acquisitions), f(r.PerSecond),
			f(r.Acquire.P50), f(r.Acquire.P90), f(r.Acquire.P99), f(r.Acquire.Max),
			strconv.Itoa(r.HandOff.N), f(r.HandOff.P50), f(r.HandOff.P99),
			strconv.Itoa(r.WaiterHandOff.N), f(r.WaiterHandOff.P50), f(r.WaiterHandOff.P99),
			f(r.Fairness.Jain), f(r.Fairness.MinShare), f(r.Fairness.MaxShare),
			strconv.FormatUint(r.Wakeups.Notify, 10), strconv.FormatUint(r.Wakeups.Poll, 10), f(r.RoundTripsPerAcq),
			strconv.Itoa(r.Safety.Overlaps), strconv.Itoa(r.Safety.Rejections), failureString(r.Failures),
			f(r.CPUSeconds), f(r.MaxRSSMiB), ts, hs})
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

// p50p99 formats a latency summary's median and 99th percentile; "-" when
// there was none.
func p50p99(l latency) string {
	if l.N == 0 {
		return "-"
	}
	return msShort(l.P50) + "/" + msShort(l.P99)
}

// versusCells are the "vs leasehold" cells of r's row: r's own throughput
// and median hand-off as multiples of leasehold's at the same procs×g, so
// that a row describes its own lock ("base" on leasehold's row).
func versusCells(all []*runResult, r *runResult) (thr, handoff string) {
	b := baseline(all, r)
	switch {
	case b == r:
		return "base", "base"
	case b == nil:
		return "-", "-"
	}
	thr, handoff = "-", "-"
	if b.PerSecond > 0 {
		thr = fmt.Sprintf("%.2f×", r.PerSecond/b.PerSecond)
	}
	if b.HandOff.N > 0 && r.HandOff.N > 0 && b.HandOff.P50 > 0 {
		handoff = fmt.Sprintf("%.2f×", r.HandOff.P50/b.HandOff.P50)
	}
	return thr, handoff
}

// writeTable writes the default output: the measures one compares first,
// under a two-line header, then a legend and the runs' notes.
func writeTable(w io.Writer, rs []*runResult) error {
	if len(rs) == 0 {
		return nil
	}
	r0 := rs[0]
	fmt.Fprintf(w, "backend %s, %d name(s) %s, hold %gms, think %gms, TTL %gms, wait %s, %.0fs per run\n\n",
		r0.Backend, r0.Keys, r0.Dist, r0.HoldMs, r0.ThinkMs, r0.TTLMs, r0.Wait, r0.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\t\t\tacquire ms\thand-off ms\t\t\tvs\tleasehold\t")
	fmt.Fprintln(tw, "lock\tprocs×g\tacq/s\tp50/p99\tp50/p99\tJain\toverlaps\tacq/s\thand-off\t")
	for _, r := range rs {
		thr, handoff := versusCells(rs, r)
		fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%s\t%s\t%.3f\t%d\t%s\t%s\t\n",
			r.Lock, r.Procs, r.Goroutines, r.PerSecond, p50p99(r.Acquire), p50p99(r.HandOff),
			r.Fairness.Jain, r.Safety.Overlaps, thr, handoff)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(rs) > 1 {
		writeWrapped(w, "vs leasehold: this row's acq/s and median hand-off ÷ leasehold's at the same procs×g.")
	}
	writeWrapped(w, "More measures (p90/max, queued hand-offs, wake-ups, round trips, CPU, RSS): -format json|csv")
	for _, r := range rs {
		id := fmt.Sprintf("%s %d×%d", r.Lock, r.Procs, r.Goroutines)
		if len(r.Failures) > 0 {
			writeWrapped(w, id+" failures and losses: "+failureString(r.Failures))
		}
		for _, e := range r.Errors {
			writeWrapped(w, id+" error: "+e)
		}
		for _, c := range r.Chaos {
			writeWrapped(w, id+" chaos: "+c)
		}
		if r.Safety.Overlaps > 0 {
			verdict := "FAILURE"
			if r.Peer {
				verdict = "finding"
			}
			writeWrapped(w, fmt.Sprintf("%s SAFETY %s: %d overlapping holdings, e.g. %+v", id, verdict, r.Safety.Overlaps, r.Safety.OverlapSamples[0]))
		}
	}
	return nil
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
