package main

import (
	"fmt"
	"strconv"
	"strings"
)

// The hand-off targets: what leasehold with the store's waiter queue must
// reach, measured against the peers at the same procs×g. They live here
// only: the verdicts, the charts' target lines and the tests read them from
// here.
const (
	// Grants per second at least this many times the better peer's.
	targetThroughputVsPeer = 1.3
	// Hand-off latency (a release to the next grant while someone waits),
	// median and 99th percentile, at most.
	targetHandOffP50Ms = 0.25
	targetHandOffP99Ms = 1.0
	// Store round trips per grant (failed attempts included), at most.
	targetRoundTrips = 2.5
	// Jain's index over the contenders' grants, and the smallest
	// contender's grants ÷ the fair share, at least.
	targetJain     = 0.98
	targetMinShare = 0.8
	// CPU per grant at most this many times the most frugal peer's. Per
	// grant, not per run: a lock that grants more may spend more.
	targetCPUVsPeers = 1.5
	// And no overlapping holdings, no refused fenced write: zero, which is
	// not a setting.
)

// check is one target as judged on one configuration.
type check struct {
	Name string
	Got  string // as measured
	Want string // the target
	// Judged is false when there was nothing to judge by: no peer at this
	// procs×g (throughput, CPU), no hand-off or no grant measured.
	Judged bool
	Met    bool
	// brief names a missed target in the verdict's line, with its value
	// unless the line gives it already.
	brief string
}

// verdict is leasehold's configuration judged against every target.
type verdict struct {
	Lock              string
	Procs, Goroutines int
	Runs              int
	Checks            []check
	// Met: every check was judged and met.
	Met  bool
	Line string // the table's one line
}

// verdicts judges each leasehold configuration of ss against the targets,
// with the peers at the same procs×g.
func verdicts(ss []*summary) []verdict {
	var out []verdict
	for _, s := range ss {
		if s.Lock != lockLeasehold {
			continue
		}
		var peers []*summary
		for _, p := range ss {
			if p.Peer && p.Procs == s.Procs && p.Goroutines == s.Goroutines {
				peers = append(peers, p)
			}
		}
		out = append(out, judge(s, peers))
	}
	return out
}

// judge checks lh against the targets; peers are the other libraries at
// the same procs×g (maybe none).
func judge(lh *summary, peers []*summary) verdict {
	v := verdict{Lock: lh.Lock, Procs: lh.Procs, Goroutines: lh.Goroutines, Runs: lh.Runs}
	var fastest, frugal *summary // the better peer by throughput, by CPU per grant
	for _, p := range peers {
		if p.PerSecond.Median > 0 && (fastest == nil || p.PerSecond.Median > fastest.PerSecond.Median) {
			fastest = p
		}
		if p.CPUMsPerGrant.N > 0 && p.CPUMsPerGrant.Median > 0 && (frugal == nil || p.CPUMsPerGrant.Median < frugal.CPUMsPerGrant.Median) {
			frugal = p
		}
	}
	atLeast := func(name string, got, want float64, gotS, wantS string, judged bool) check {
		return check{Name: name, Got: gotS, Want: "≥ " + wantS, Judged: judged, Met: judged && got >= want}
	}
	atMost := func(name string, got, want float64, gotS, wantS string, judged bool) check {
		return check{Name: name, Got: gotS, Want: "≤ " + wantS, Judged: judged, Met: judged && got <= want}
	}
	none := func(name string, got int) check {
		return check{Name: name, Got: strconv.Itoa(got), Want: "0", Judged: true, Met: got == 0}
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	refusal := refusalNoun(lh.Limit)

	thr := check{Name: "throughput", Got: "no peer", Want: "≥ " + num(targetThroughputVsPeer) + "× the better peer's"}
	if fastest != nil {
		x := lh.PerSecond.Median / fastest.PerSecond.Median
		thr = atLeast("throughput", x, targetThroughputVsPeer, fmt.Sprintf("%.2f× %s's", x, fastest.Lock), num(targetThroughputVsPeer)+"×", true)
	}
	handed := lh.HandOffP50.N > 0
	granted := lh.Jain.N > 0
	cpu := check{Name: "CPU per grant", Got: "no peer", Want: "≤ " + num(targetCPUVsPeers) + "× the peers'"}
	if frugal != nil && lh.CPUMsPerGrant.N > 0 {
		x := lh.CPUMsPerGrant.Median / frugal.CPUMsPerGrant.Median
		cpu = atMost("CPU per grant", x, targetCPUVsPeers, fmt.Sprintf("%.2f× %s's", x, frugal.Lock), num(targetCPUVsPeers)+"×", true)
	}
	v.Checks = []check{
		thr,
		atMost("hand-off p50", lh.HandOffP50.Median, targetHandOffP50Ms, msOrNone(lh.HandOffP50), num(targetHandOffP50Ms)+" ms", handed),
		atMost("hand-off p99", lh.HandOffP99.Median, targetHandOffP99Ms, msOrNone(lh.HandOffP99), num(targetHandOffP99Ms)+" ms", handed),
		atMost("round trips per grant", lh.RoundTripsPerAcq.Median, targetRoundTrips, fmt.Sprintf("%.2f", lh.RoundTripsPerAcq.Median), num(targetRoundTrips), granted),
		atLeast("Jain", lh.Jain.Median, targetJain, fmt.Sprintf("%.3f", lh.Jain.Median), num(targetJain), granted),
		atLeast("smallest share", lh.MinShare.Median, targetMinShare, fmt.Sprintf("%.2f", lh.MinShare.Median), num(targetMinShare), granted),
		cpu,
		none("overlaps", lh.Overlaps),
		none(refusal+"s", lh.Rejections),
	}
	for i := range v.Checks {
		c := &v.Checks[i]
		switch c.Name {
		case "throughput", "hand-off p50", "hand-off p99", "overlaps": // the line's head gives their values
			c.brief = c.Name
		case "round trips per grant":
			c.brief = "round trips " + c.Got + "/grant"
		case "CPU per grant":
			c.brief = "CPU per grant " + c.Got
		case refusal + "s":
			c.brief = plural(lh.Rejections, refusal)
		default:
			c.brief = c.Name + " " + c.Got
		}
	}
	v.Met = true
	var missed, unjudged []string
	for _, c := range v.Checks {
		switch {
		case !c.Judged:
			unjudged = append(unjudged, c.Name)
			v.Met = false
		case !c.Met:
			missed = append(missed, c.brief)
			v.Met = false
		}
	}

	head := fmt.Sprintf("%s %d×%d: ", lh.Lock, lh.Procs, lh.Goroutines)
	if fastest != nil {
		head += fmt.Sprintf("%.2f× the better peer's throughput (%s)", lh.PerSecond.Median/fastest.PerSecond.Median, fastest.Lock)
	} else {
		head += "no peer to compare with"
	}
	if handed {
		head += fmt.Sprintf(", hand-off p50 %s / p99 %s ms", msShort(lh.HandOffP50.Median), msShort(lh.HandOffP99.Median))
	} else {
		head += ", no hand-off measured"
	}
	head += ", " + plural(lh.Overlaps, "overlap")
	switch {
	case len(missed) > 0:
		v.Line = head + " — misses " + strings.Join(missed, ", ")
	case len(unjudged) > 0:
		v.Line = head + " — meets the targets it could judge (not judged: " + strings.Join(unjudged, ", ") + ")"
	default:
		v.Line = head + " — meets the hand-off targets"
	}
	return v
}

// targetsLine states the targets once, above the verdicts, for runs of
// limit (1: an exclusive lock).
func targetsLine(limit int) string {
	return fmt.Sprintf("Targets: throughput ≥ %g× the better peer's; hand-off p50 ≤ %g ms, p99 ≤ %g ms; ≤ %g round trips per grant; "+
		"Jain ≥ %g, smallest share ≥ %g of the fair one; CPU per grant ≤ %g× the most frugal peer's; 0 overlaps; 0 %ss. "+
		"Medians over the runs; overlaps and refusals over all of them.",
		targetThroughputVsPeer, targetHandOffP50Ms, targetHandOffP99Ms, targetRoundTrips, targetJain, targetMinShare, targetCPUVsPeers, refusalNoun(limit))
}

// refusalNoun names the checker's token findings under limit: fencing
// refusals of the shared record for an exclusive lock, token-order
// violations above 1 (see checkSafety).
func refusalNoun(limit int) string {
	if limit > 1 {
		return "token-order violation"
	}
	return "fencing refusal"
}

// msOrNone formats a latency median in milliseconds, "none" without one.
func msOrNone(s spread) string {
	if s.N == 0 {
		return "none"
	}
	return msShort(s.Median) + " ms"
}

// plural writes n with its noun: "0 overlaps", "1 overlap".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
