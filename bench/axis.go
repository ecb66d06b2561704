package main

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// An axis is fitted to its data so that the data fill it: linear unless
// the values span more than logSpan (a log axis over a narrow range has
// few ticks and flattens the differences one wants to see), from the
// smallest to the largest value with marginFrac of the span added at each
// end (in log space on a log axis), and never below zero for data that are
// not.
const (
	logSpan    = 20   // largest ÷ smallest at which an axis turns logarithmic
	marginFrac = 0.08 // of the data's span, at each end
)

// axisFit is an axis's scale and range.
type axisFit struct {
	Min, Max float64
	Log      bool
}

// fitAxis fits an axis to data from lo to hi (every value drawn: error bars
// and target lines included).
func fitAxis(lo, hi float64) axisFit {
	if lo > hi {
		lo, hi = hi, lo
	}
	if lo > 0 && hi/lo >= logSpan {
		l, h := math.Log10(lo), math.Log10(hi)
		m := (h - l) * marginFrac
		return axisFit{Min: math.Pow(10, l-m), Max: math.Pow(10, h+m), Log: true}
	}
	return fitLinear(lo, hi)
}

// fitLinear fits a linear axis to data from lo to hi (lo ≤ hi).
func fitLinear(lo, hi float64) axisFit {
	m := (hi - lo) * marginFrac
	if m == 0 {
		// One value: show it in the middle of a range a fifth of its size
		// (or 0 to 1 for a zero).
		m = math.Abs(hi) * 0.1
		if m == 0 {
			return axisFit{Min: 0, Max: 1}
		}
	}
	f := axisFit{Min: lo - m, Max: hi + m}
	if lo >= 0 && f.Min < 0 {
		f.Min = 0
	}
	return f
}

// apply sets the axis's scale, range and ticks.
func (f axisFit) apply(a *plot.Axis) {
	a.Min, a.Max = f.Min, f.Max
	if f.Log {
		a.Scale = plot.LogScale{}
		a.Tick.Marker = logTicks{}
	} else {
		a.Scale = plot.LinearScale{}
		a.Tick.Marker = linearTicks{}
	}
}

// transform maps v into the axis's own space (log10 on a log axis), where
// distances are what the eye sees; untransform is its inverse.
func (f axisFit) transform(v float64) float64 {
	if f.Log {
		return math.Log10(v)
	}
	return v
}

func (f axisFit) untransform(v float64) float64 {
	if f.Log {
		return math.Pow(10, v)
	}
	return v
}

// logTicks label 1, 2 and 5 times each power of ten in range (gonum's own
// log ticks label powers of ten only, which leaves a short log axis with
// one label or none) and mark the other integers times a power of ten.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		p := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * p
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(roundSig(v), 'f', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// linearTicks label multiples of a round step (1, 2, 2.5 or 5 times a
// power of ten) giving four to six labels, and mark the halfway points.
// (gonum's default ticks may start at an offset: 0.75, 1.75, 2.75.)
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(roundSig(lo), 'f', -1, 64)}}
	}
	step := niceStep((hi - lo) / 6)
	half := step / 2
	var ts []plot.Tick
	for k := math.Ceil(lo / half); k*half <= hi; k++ {
		v := k * half
		t := plot.Tick{Value: v}
		if math.Mod(k, 2) == 0 {
			t.Label = strconv.FormatFloat(roundSig(v), 'f', -1, 64)
		}
		ts = append(ts, t)
	}
	return ts
}

// niceStep is the smallest of 1, 2, 2.5, 5 and 10 times a power of ten
// that is at least raw (> 0).
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// roundSig drops the float noise of m×10^e (0.30000000000000004).
func roundSig(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return f
}

// valueTicks labels exactly the given values (the contender counts a sweep
// ran), so that no tick sits where nothing was measured.
type valueTicks struct {
	values []float64
	labels []string
}

func (t valueTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for i, v := range t.values {
		if v >= lo && v <= hi {
			ts = append(ts, plot.Tick{Value: v, Label: t.labels[i]})
		}
	}
	return ts
}
