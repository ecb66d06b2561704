package main

import (
	"cmp"
	"slices"
	"time"
)

// overlap is two holdings of one name that both believed they held it at
// once: a safety violation.
type overlap struct {
	Key              int
	WorkerA, WorkerB int
	TokenA, TokenB   uint64
	Overlap          time.Duration
	LostA, LostB     bool
	// At is when the second holding began, in seconds since the run's start
	// (to match it with chaos events).
	At float64
}

// safety is the checker's verdict on one run.
type safety struct {
	Overlaps        int              // pairs of holdings that overlapped
	OverlapSamples  []overlap        // the first few
	Rejections      int              // fencing writes refused by the shared record
	RejectSamples   []fenceRejection // the first few
	FencedHoldings  int              // holdings with at least one refused write
	HoldingsChecked int
}

// maxSamples bounds the violations a report lists one by one.
const maxSamples = 10

// checkSafety looks for overlapping intervals per name. Intervals are sorted
// by start; each is compared with the one reaching furthest so far, so every
// holding that began before an earlier one ended is reported.
func checkSafety(ivs []interval, rejections []fenceRejection, runStart int64) safety {
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
		var far *interval
		for i := range byKey {
			iv := &byKey[i]
			if far != nil && iv.Start < far.End {
				s.Overlaps++
				if len(s.OverlapSamples) < maxSamples {
					s.OverlapSamples = append(s.OverlapSamples, overlap{
						Key: iv.Key, WorkerA: far.Worker, WorkerB: iv.Worker, TokenA: far.Token, TokenB: iv.Token,
						Overlap: time.Duration(min(far.End, iv.End) - iv.Start), LostA: far.Lost, LostB: iv.Lost,
						At: float64(iv.Start-runStart) / 1e9,
					})
				}
			}
			if far == nil || iv.End > far.End {
				far = iv
			}
		}
	}
	return s
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
func handOffs(ivs []interval, contenders int) (all, queued []time.Duration) {
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
