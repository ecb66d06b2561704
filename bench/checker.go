package main

import (
	"cmp"
	"slices"
	"sort"
	"time"
)

// overlap is a holding of a name that began while the name's limit of
// holdings were live already (with a limit of 1: two holdings of one name
// that both believed they held it at once): a safety violation.
type overlap struct {
	Key              int
	WorkerA, WorkerB int
	TokenA, TokenB   uint64
	// Overlap is how long B was live together with the limit's number of
	// the holdings live at its start (with a limit of 1: how long A and B
	// overlapped). A is the live one that ended last.
	Overlap      time.Duration
	LostA, LostB bool
	// At is when the second holding began, in seconds since the run's start
	// (to match it with chaos events).
	At float64
}

// safety is the checker's verdict on one run.
type safety struct {
	// Overlaps are the holdings that began while the limit's number of
	// holdings of their name were live already (limit 1: pairs of
	// holdings that overlapped).
	Overlaps       int
	OverlapSamples []overlap // the first few
	// Rejections are, with a limit of 1, the fencing writes refused by the
	// shared record; above 1, the holdings whose token broke the order
	// (see tokenOrder).
	Rejections      int
	RejectSamples   []fenceRejection // the first few
	FencedHoldings  int              // holdings with at least one refused write or a token out of order
	HoldingsChecked int
}

// maxSamples bounds the violations a report lists one by one.
const maxSamples = 10

// checkSafety looks, name by name, for instants at which more than limit
// holdings were live: a sweep over the intervals sorted by start, keeping
// the live ones (a holding that ends when another begins is not live at
// that instant), reports every holding that began while limit holdings were
// live already. With a limit of 1 that is every holding that began before an
// earlier one ended.
//
// With a limit of 1 the fencing refusals are those of the shared record.
// Above 1 the record is not written (its newest token would refuse the
// older of several legitimate holders), and the tokens are checked from the
// intervals instead: see tokenOrder.
func checkSafety(ivs []interval, rejections []fenceRejection, runStart int64, limit int) safety {
	limit = max(limit, 1)
	s := safety{HoldingsChecked: len(ivs), Rejections: len(rejections)}
	for _, r := range rejections {
		if len(s.RejectSamples) < maxSamples {
			s.RejectSamples = append(s.RejectSamples, r)
		}
	}
	for _, iv := range ivs {
		if iv.Fenced > 0 {
			s.FencedHoldings++
		}
	}
	for _, byKey := range groupByKey(ivs) {
		var live []*interval
		for i := range byKey {
			iv := &byKey[i]
			live = slices.DeleteFunc(live, func(l *interval) bool { return l.End <= iv.Start })
			if len(live) >= limit {
				s.Overlaps++
				if len(s.OverlapSamples) < maxSamples {
					s.OverlapSamples = append(s.OverlapSamples, overlapAt(iv, live, limit, runStart))
				}
			}
			live = append(live, iv)
		}
		if limit > 1 {
			for _, r := range tokenOrder(byKey) {
				s.Rejections++
				s.FencedHoldings++
				if len(s.RejectSamples) < maxSamples {
					s.RejectSamples = append(s.RejectSamples, r)
				}
			}
		}
	}
	return s
}

// overlapAt describes iv, which began while the holdings live (limit of
// them or more) were live: A is the live one that ends last, and the overlap
// lasts until iv or the limit-th last of them ends.
func overlapAt(iv *interval, live []*interval, limit int, runStart int64) overlap {
	ends := make([]int64, len(live))
	far := live[0]
	for i, l := range live {
		ends[i] = l.End
		if l.End > far.End {
			far = l
		}
	}
	slices.Sort(ends)
	until := min(iv.End, ends[len(ends)-limit])
	return overlap{
		Key: iv.Key, WorkerA: far.Worker, WorkerB: iv.Worker, TokenA: far.Token, TokenB: iv.Token,
		Overlap: time.Duration(until - iv.Start), LostA: far.Lost, LostB: iv.Lost,
		At: float64(iv.Start-runStart) / 1e9,
	}
}

// tokenOrder checks the fencing tokens of one name's holdings (sorted by
// start) under a limit above 1, where several holders write at once and
// no "newest token" can refuse a stale one. Tokens increase across all
// holders in the order the store grants them, so it reports every holding
// (with a token) whose token
//
//   - is not above the token of every holding whose grant returned before
//     this holding's acquire was called (that grant came first, wherever
//     the two went); Highest is the highest such token; or
//   - is the token of another holding of the name (Highest is the token).
//
// Grants whose acquires overlapped in time may return in either order, and
// are checked for distinct tokens only.
func tokenOrder(byStart []interval) []fenceRejection {
	count := map[uint64]int{}
	for _, iv := range byStart {
		if iv.Token != 0 {
			count[iv.Token]++
		}
	}
	byCall := slices.Clone(byStart)
	slices.SortStableFunc(byCall, func(a, b interval) int { return cmp.Compare(a.Call, b.Call) })
	var out []fenceRejection
	var before uint64 // the highest token granted before the current call
	j := 0
	for _, iv := range byCall {
		for ; j < len(byStart) && byStart[j].Start < iv.Call; j++ {
			before = max(before, byStart[j].Token)
		}
		if iv.Token == 0 {
			continue
		}
		switch {
		case before >= iv.Token:
			out = append(out, fenceRejection{Key: iv.Key, Worker: iv.Worker, Token: iv.Token, Highest: before, At: iv.Start})
		case count[iv.Token] > 1:
			out = append(out, fenceRejection{Key: iv.Key, Worker: iv.Worker, Token: iv.Token, Highest: iv.Token, At: iv.Start})
		}
	}
	return out
}

// utilisation is, for each of the first names names, the time-averaged
// number of its live holdings over [from, to], divided by limit: 1 when
// every slot was held all the time. A holding counts from its grant's
// return to its holder's last act before the release (the holder's view:
// the store's slot is taken for the acquire's and the release's trips
// besides).
func utilisation(ivs []interval, names, limit int, from, to int64) []float64 {
	out := make([]float64, names)
	if to <= from {
		return out
	}
	for _, iv := range ivs {
		if iv.Key >= names {
			continue
		}
		if s, e := max(iv.Start, from), min(iv.End, to); e > s {
			out[iv.Key] += float64(e - s)
		}
	}
	for i := range out {
		out[i] /= float64(to-from) * float64(max(limit, 1))
	}
	return out
}

// groupByKey splits intervals by name, each group sorted by start.
func groupByKey(ivs []interval) map[int][]interval {
	g := map[int][]interval{}
	for _, iv := range ivs {
		g[iv.Key] = append(g[iv.Key], iv)
	}
	for _, v := range g {
		slices.SortFunc(v, func(a, b interval) int { return cmp.Compare(a.Start, b.Start) })
	}
	return g
}

// handOffs are the gaps between one holder's last act (just before its
// release call) and the next grant of the same name, counted when at the
// release another contender was already waiting for the name (otherwise the
// name was simply idle). The next grant may go to the releaser itself, asking
// again: then the waiters paid for the gap all the same. queued is the subset
// where the next holder had been waiting since before the previous holder's
// grant.
//
// With a limit above 1, see slotHandOffs.
func handOffs(ivs []interval, contenders, limit int) (all, queued []time.Duration) {
	if limit > 1 {
		return slotHandOffs(ivs, contenders, limit)
	}
	for _, byKey := range groupByKey(ivs) {
		for i := 1; i < len(byKey); i++ {
			prev, next := byKey[i-1], byKey[i]
			if next.Start < prev.End || !waiting(byKey[i:], prev, contenders) {
				continue
			}
			d := time.Duration(next.Start - prev.End)
			all = append(all, d)
			if next.Call <= prev.Start {
				queued = append(queued, d)
			}
		}
	}
	return all, queued
}

// waiting reports whether a contender other than prev's holder had asked for
// the name before prev ended and was granted it later (in later). Each
// contender has one acquire outstanding at most, so a contender's first
// grant in later is the only one that can have been asked for before prev
// ended: the scan stops once every contender has been seen.
func waiting(later []interval, prev interval, contenders int) bool {
	seen := make(map[int]bool, contenders)
	for _, iv := range later {
		if seen[iv.Worker] {
			continue
		}
		seen[iv.Worker] = true
		if iv.Worker != prev.Worker && iv.Call <= prev.End {
			return true
		}
		if len(seen) >= contenders {
			return false
		}
	}
	return false
}

// slotHandOffs are the hand-offs of names of a limit above 1: a release
// counts when, at it, the name was full (its limit of holdings live, this
// one included, or on their way to waiters: slots freed by earlier counted
// releases and not granted again yet) and a contender other than the
// releaser was waiting (asked before the release, granted after it). Each
// counted release is paired with the next grant of the name not paired
// with an earlier release (in order: the oldest freed slot first), and the
// hand-off is the gap from the release (its holder's last act) to that
// grant. queued is, as with a limit of 1, the subset where the new holder
// had been waiting since before the releaser's grant.
func slotHandOffs(ivs []interval, contenders, limit int) (all, queued []time.Duration) {
	// kind orders the events of one instant: releases first (a holding
	// that ends when another begins does not overlap it), then grants, then
	// the releases of holdings that began at that same instant.
	const (
		release = iota
		grant
		instantRelease
	)
	type event struct {
		at   int64
		kind int
		i    int // into byKey
	}
	for _, byKey := range groupByKey(ivs) {
		events := make([]event, 0, 2*len(byKey))
		for i, iv := range byKey {
			events = append(events, event{iv.Start, grant, i})
			if iv.End > iv.Start {
				events = append(events, event{iv.End, release, i})
			} else {
				events = append(events, event{iv.End, instantRelease, i})
			}
		}
		slices.SortStableFunc(events, func(a, b event) int {
			if c := cmp.Compare(a.at, b.at); c != 0 {
				return c
			}
			return cmp.Compare(a.kind, b.kind)
		})
		live := 0
		var freed []int // counted releases whose slot is not granted again yet, oldest first
		for _, e := range events {
			iv := byKey[e.i]
			if e.kind == grant {
				live++
				if len(freed) > 0 {
					prev := byKey[freed[0]]
					freed = freed[1:]
					d := time.Duration(iv.Start - prev.End)
					all = append(all, d)
					if iv.Call <= prev.Start {
						queued = append(queued, d)
					}
				}
				continue
			}
			// The grants from the release on: each contender's first is
			// the only one it can have asked for before the release.
			later := byKey[sort.Search(len(byKey), func(j int) bool { return byKey[j].Start >= iv.End }):]
			if live+len(freed) >= limit && waiting(later, iv, contenders) {
				freed = append(freed, e.i)
			}
			live--
		}
	}
	return all, queued
}
