package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeReport writes results.json and, drawn with gonum.org/v1/plot,
// throughput.png and handoff.png: acquisitions per second and median
// hand-off latency against the number of contenders, one line per lock.
func writeReport(dir string, rs []*runResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(report(rs), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	return writeCharts(dir, rs)
}

// replot draws the charts of dir again from its results.json and returns
// its runs.
func replot(dir string) ([]*runResult, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return nil, err
	}
	var j jsonReport
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	if len(j.Runs) == 0 {
		return nil, fmt.Errorf("%s: no runs", filepath.Join(dir, "results.json"))
	}
	return j.Runs, writeCharts(dir, j.Runs)
}

// writeCharts draws throughput.png and handoff.png into dir.
func writeCharts(dir string, rs []*runResult) error {
	if err := chart(filepath.Join(dir, "throughput.png"), "Throughput", "acquisitions / s", rs,
		func(r *runResult) float64 { return r.PerSecond }, false); err != nil {
		return err
	}
	return chart(filepath.Join(dir, "handoff.png"), "Median hand-off latency", "hand-off p50 (ms, log scale)", rs,
		func(r *runResult) float64 { return r.HandOff.P50 }, true)
}

// chart draws y against the number of contenders, a line per lock.
func chart(path, title, ylabel string, rs []*runResult, y func(*runResult) float64, logY bool) error {
	p := plot.New()
	r0 := rs[0]
	p.Title.Text = fmt.Sprintf("%s: %s, %d name(s) %s, hold %gms, think %gms", title, r0.Backend, r0.Keys, r0.Dist, r0.HoldMs, r0.ThinkMs)
	p.X.Label.Text = "contenders (processes × goroutines)"
	p.Y.Label.Text = ylabel
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	byLock := map[string]plotter.XYs{}
	var order []string
	for _, r := range rs {
		v := y(r)
		if logY && v <= 0 {
			continue
		}
		if _, ok := byLock[r.Lock]; !ok {
			order = append(order, r.Lock)
		}
		byLock[r.Lock] = append(byLock[r.Lock], plotter.XY{X: float64(r.Contenders), Y: v})
	}
	var lines []any
	for _, l := range order {
		pts := byLock[l]
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		lines = append(lines, l, pts)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	// gonum's log ticks need at least one decade: round the range out to
	// whole decades.
	if logY && p.Y.Min > 0 {
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(p.Y.Min)))
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(p.Y.Max)))
		if p.Y.Max <= p.Y.Min {
			p.Y.Max = p.Y.Min * 10
		}
	}
	p.X.Min = 0
	// Headroom above the lines for the legend.
	if logY {
		p.Y.Max *= 10
	} else {
		p.Y.Min = min(p.Y.Min, 0)
		p.Y.Max *= 1.4
	}
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
