package main

import (
	"time"

	"github.com/montanaflynn/stats"
)

// latency summarises a set of durations, in milliseconds.
type latency struct {
	N                  int
	P50, P90, P99, Max float64
}

// summarise computes percentiles with github.com/montanaflynn/stats.
func summarise(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	ms := make(stats.Float64Data, len(ds))
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	p := func(q float64) float64 { v, _ := ms.Percentile(q); return v }
	mx, _ := ms.Max()
	return latency{N: len(ds), P50: p(50), P90: p(90), P99: p(99), Max: mx}
}

// fairness is how evenly acquisitions were spread over the contenders.
type fairness struct {
	// Jain is Jain's index, (Σx)² / (n·Σx²): 1 when every contender got the
	// same number of acquisitions, 1/n when one got them all.
	Jain float64
	// MinShare and MaxShare are the smallest and largest contender's
	// acquisitions relative to an even share (1 = exactly even).
	MinShare, MaxShare float64
}

// jain computes fairness over per-contender acquisition counts (zeros
// included: a contender that never got the lock counts).
func jain(counts []float64) fairness {
	if len(counts) == 0 {
		return fairness{}
	}
	data := stats.Float64Data(counts)
	sum, _ := data.Sum()
	if sum == 0 {
		return fairness{}
	}
	var sq float64
	for _, x := range counts {
		sq += x * x
	}
	n := float64(len(counts))
	mn, _ := data.Min()
	mx, _ := data.Max()
	even := sum / n
	return fairness{Jain: sum * sum / (n * sq), MinShare: mn / even, MaxShare: mx / even}
}

// shares are counts relative to an even share (1 = exactly even), in order;
// nil when nothing was counted.
func shares(counts []float64) []float64 {
	var sum float64
	for _, x := range counts {
		sum += x
	}
	if sum == 0 {
		return nil
	}
	even := sum / float64(len(counts))
	out := make([]float64, len(counts))
	for i, x := range counts {
		out[i] = x / even
	}
	return out
}
