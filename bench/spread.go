package main

import (
	"slices"
)

// spread is one measure over the repeated runs of a configuration (-repeat):
// the median, which the table and the charts show, and the smallest and
// largest run's values, which bound it.
type spread struct {
	Median, Min, Max float64
	N                int // runs that had the measure
}

// spreadOf summarises vs; the zero spread (N 0) when there is none. The
// median of an even number of values is the mean of the middle two.
func spreadOf(vs []float64) spread {
	if len(vs) == 0 {
		return spread{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return spread{Median: m, Min: s[0], Max: s[n-1], N: n}
}

// varies reports whether the runs disagreed at all (a spread to draw).
func (s spread) varies() bool { return s.Max > s.Min }

// summary is one configuration, a lock at one procs×g, over its repeated
// runs: medians with their spread for the measures one compares, and totals
// for the safety counts, of which a single one is one too many.
type summary struct {
	Lock                          string
	Peer                          bool
	Procs, Goroutines, Contenders int
	Runs                          int

	PerSecond              spread
	AcquireP50, AcquireP99 spread
	HandOffP50, HandOffP99 spread // over the runs that had hand-offs
	Jain, MinShare         spread
	RoundTripsPerAcq       spread
	CPUMsPerGrant          spread // CPU of all workers ÷ grants

	Overlaps, Rejections int // over every run
	// FallbackWakes are grants a waiter took by its own poll rather than
	// by a hand-off notice, over every run; nil when a run did not count
	// them (n/a).
	FallbackWakes *uint64
	// Shares are the contenders' shares of the grants (1 = the fair
	// share), each run's sorted from the smallest, then taken rank by rank
	// over the runs.
	Shares []spread

	// Limit is the runs' -limit when above 1; 0 for an exclusive lock.
	Limit int `json:",omitempty"`
	// Utilisation is name 0's (the hot name's) time-averaged holders ÷
	// Limit, with a limit above 1.
	Utilisation *spread `json:",omitempty"`
}

// configKey tells the configurations of one command line apart.
type configKey struct {
	Lock              string
	Procs, Goroutines int
}

// summarizeRuns groups runs by configuration, in the order they first appear.
func summarizeRuns(rs []*runResult) []*summary {
	byKey := map[configKey][]*runResult{}
	var order []configKey
	for _, r := range rs {
		k := configKey{r.Lock, r.Procs, r.Goroutines}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	out := make([]*summary, 0, len(order))
	for _, k := range order {
		out = append(out, summaryOf(byKey[k]))
	}
	return out
}

// summaryOf summarises the runs of one configuration (at least one).
func summaryOf(runs []*runResult) *summary {
	r0 := runs[0]
	s := &summary{Lock: r0.Lock, Peer: r0.Peer, Procs: r0.Procs, Goroutines: r0.Goroutines, Contenders: r0.Contenders, Runs: len(runs)}
	over := func(f func(*runResult) (float64, bool)) spread {
		var vs []float64
		for _, r := range runs {
			if v, ok := f(r); ok {
				vs = append(vs, v)
			}
		}
		return spreadOf(vs)
	}
	always := func(f func(*runResult) float64) spread {
		return over(func(r *runResult) (float64, bool) { return f(r), true })
	}
	withHandOffs := func(f func(*runResult) float64) spread {
		return over(func(r *runResult) (float64, bool) { return f(r), r.HandOff.N > 0 })
	}
	withGrants := func(f func(*runResult) float64) spread {
		return over(func(r *runResult) (float64, bool) { return f(r), r.Acquisitions > 0 })
	}
	s.PerSecond = always(func(r *runResult) float64 { return r.PerSecond })
	s.AcquireP50 = withGrants(func(r *runResult) float64 { return r.Acquire.P50 })
	s.AcquireP99 = withGrants(func(r *runResult) float64 { return r.Acquire.P99 })
	s.HandOffP50 = withHandOffs(func(r *runResult) float64 { return r.HandOff.P50 })
	s.HandOffP99 = withHandOffs(func(r *runResult) float64 { return r.HandOff.P99 })
	s.Jain = withGrants(func(r *runResult) float64 { return r.Fairness.Jain })
	s.MinShare = withGrants(func(r *runResult) float64 { return r.Fairness.MinShare })
	s.RoundTripsPerAcq = withGrants(func(r *runResult) float64 { return r.RoundTripsPerAcq })
	s.CPUMsPerGrant = withGrants(func(r *runResult) float64 { return 1000 * r.CPUSeconds / float64(r.Acquisitions) })
	if r0.Limit > 1 {
		s.Limit = r0.Limit
		u := over(func(r *runResult) (float64, bool) {
			if len(r.Utilisation) == 0 {
				return 0, false
			}
			return r.Utilisation[0], true
		})
		s.Utilisation = &u
	}

	var fallback uint64
	counted := true
	var sorted [][]float64
	for _, r := range runs {
		s.Overlaps += r.Safety.Overlaps
		s.Rejections += r.Safety.Rejections
		if r.Handoffs == nil {
			counted = false
		} else {
			fallback += r.Handoffs.Poll
		}
		if len(r.Shares) > 0 {
			sh := slices.Clone(r.Shares)
			slices.Sort(sh)
			sorted = append(sorted, sh)
		}
	}
	if counted {
		s.FallbackWakes = &fallback
	}
	s.Shares = byRank(sorted)
	return s
}

// byRank takes sorted lists rank by rank: the spread of every list's
// smallest, then of every list's second smallest, and so on. Lists can
// differ in length (chaos kill drops a process's contenders); a rank is
// taken over the lists that have it.
func byRank(sorted [][]float64) []spread {
	n := 0
	for _, l := range sorted {
		n = max(n, len(l))
	}
	out := make([]spread, n)
	for i := range out {
		var vs []float64
		for _, l := range sorted {
			if i < len(l) {
				vs = append(vs, l[i])
			}
		}
		out[i] = spreadOf(vs)
	}
	return out
}

// maxRuns is the largest number of runs of one configuration.
func maxRuns(ss []*summary) int {
	n := 0
	for _, s := range ss {
		n = max(n, s.Runs)
	}
	return n
}
