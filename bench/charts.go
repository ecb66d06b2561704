package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeReport writes results.json and the charts (see writeCharts).
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

// Chart files written by writeCharts.
const (
	chartThroughput = "throughput.png"
	chartHandOff    = "handoff.png"
	chartHandOffP99 = "handoff-p99.png"
	chartFairness   = "fairness.png"
	chartSafety     = "safety.png"
)

// writeCharts draws, drawn with gonum.org/v1/plot, against the number of
// contenders, a line per lock, the median over the repeated runs with
// min–max bars: throughput.png (grants per second), handoff.png and
// handoff-p99.png (hand-off latency, with leasehold's target); then
// fairness.png (each contender's share of the grants at the highest
// contention, sorted) and safety.png (a table: overlaps, refused fenced
// writes and fallback wakes per lock). A chart with nothing to show (no
// hand-off; no shares in a results.json older than them) is not written.
func writeCharts(dir string, rs []*runResult) error {
	ss := summarizeRuns(rs)
	runs := maxRuns(ss)
	ctx := chartContext(rs[0])
	if runs > 1 {
		ctx += fmt.Sprintf("; median of %d runs, bars from the lowest to the highest", runs)
	} else {
		ctx += "; one run each"
	}
	lines := []lineSpec{
		{file: chartThroughput, title: "Throughput — higher is better", ylabel: "grants / s",
			y: func(s *summary) spread { return s.PerSecond }},
		{file: chartHandOff, title: "Hand-off latency, median — lower is better", ylabel: "hand-off p50 (ms)",
			y: func(s *summary) spread { return s.HandOffP50 }, target: targetHandOffP50Ms},
		{file: chartHandOffP99, title: "Hand-off latency, 99th percentile — lower is better", ylabel: "hand-off p99 (ms)",
			y: func(s *summary) spread { return s.HandOffP99 }, target: targetHandOffP99Ms},
	}
	for _, l := range lines {
		if err := lineChart(filepath.Join(dir, l.file), ss, ctx, l); err != nil {
			return fmt.Errorf("%s: %w", l.file, err)
		}
	}
	if err := fairnessChart(filepath.Join(dir, chartFairness), ss, ctx); err != nil {
		return fmt.Errorf("%s: %w", chartFairness, err)
	}
	total := chartContext(rs[0])
	if runs > 1 {
		total += fmt.Sprintf("; totals over %d runs", runs)
	}
	if err := safetyPanel(filepath.Join(dir, chartSafety), ss, total, rs[0].limit()); err != nil {
		return fmt.Errorf("%s: %w", chartSafety, err)
	}
	return nil
}

// workload describes what the runs contended for, in words: "one hot
// name", "16 names, uniform", "16 names, zipf s=1.2".
func workload(r *runResult) string {
	switch {
	case r.Keys == 1 || r.Dist == "hot":
		return "one hot name"
	case r.Dist == "zipf" && r.ZipfS > 0:
		return fmt.Sprintf("%d names, zipf s=%g", r.Keys, r.ZipfS)
	}
	return fmt.Sprintf("%d names, %s", r.Keys, r.Dist)
}

// chartContext starts the second line of every chart's title: the backend
// and the workload.
func chartContext(r0 *runResult) string {
	return fmt.Sprintf("%s, %s%s, hold %g ms, think %g ms, %g s per run", r0.Backend, workload(r0), limitWords(r0), r0.HoldMs, r0.ThinkMs, r0.Seconds)
}

// lockStyle is the colour, dash and glyph of a lock, the same in every
// chart: leasehold blue and solid, the peers after it, red for the unsafe
// lock only.
func lockStyle(lock string) (color.Color, []vg.Length, draw.GlyphDrawer) {
	i := slices.Index([]string{lockLeasehold, lockRedislock, lockRedsync, lockPGLock, lockUnsafe}, lock)
	if i < 0 {
		i = 5
	}
	colours := []int{2, 1, 3, 4, 0, 6} // indexes into plotutil.DarkColors
	return plotutil.DarkColors[colours[i]], plotutil.Dashes(i), plotutil.Shape(i)
}

var (
	black    = color.Black
	grey     = color.Gray{Y: 110}
	red      = color.RGBA{R: 200, G: 20, B: 20, A: 255}
	amber    = color.RGBA{R: 200, G: 110, B: 0, A: 255}
	green    = color.RGBA{G: 130, B: 60, A: 255}
	dpi      = 110
	figWidth = 8 * vg.Inch
)

func textStyle(size vg.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
}

// figure is a chart as saved: a title of two lines across the top, the
// plot, and the legend in a column of its own on the right, where it hides
// no data (gonum draws a plot's own legend inside the data area).
type figure struct {
	title, context string
	plot           *plot.Plot
	legend         plot.Legend
}

func (f *figure) save(path string, height vg.Length) error {
	img := vgimg.NewWith(vgimg.UseWH(figWidth, height), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	pad := vg.Points(8)
	top := drawTitle(&dc, f.title, f.context, pad)
	legendWidth := f.legend.Rectangle(dc).Size().X + 2*pad
	f.legend.Draw(draw.Crop(dc, dc.Max.X-legendWidth+pad, -pad, pad, -top-2*pad))
	f.plot.Draw(draw.Crop(dc, pad, -legendWidth, pad, -top))
	return writePNG(path, img)
}

// titleStyles are the styles of a figure's title and its context line.
func titleStyles() (title, context text.Style) {
	title = textStyle(14, black)
	title.XAlign, title.YAlign = draw.XCenter, draw.YTop
	context = textStyle(10, grey)
	context.XAlign, context.YAlign = draw.XCenter, draw.YTop
	return title, context
}

// titleHeight is the height drawTitle takes.
func titleHeight(title, context string, pad vg.Length) vg.Length {
	ts, cs := titleStyles()
	return pad + ts.Height(title) + vg.Points(3) + cs.Height(context) + pad
}

// drawTitle writes the title and its context line centred at the top of dc
// and returns the height they took.
func drawTitle(dc *draw.Canvas, title, context string, pad vg.Length) vg.Length {
	ts, cs := titleStyles()
	y := dc.Max.Y - pad
	dc.FillText(ts, vg.Point{X: dc.Center().X, Y: y}, title)
	y -= ts.Height(title) + vg.Points(3)
	dc.FillText(cs, vg.Point{X: dc.Center().X, Y: y}, context)
	return titleHeight(title, context, pad)
}

func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// newLegend is the legend's style: text after the icons, from the top.
func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle = textStyle(11, black)
	l.Padding = vg.Points(4)
	return l
}

// newPlot is a plot without a title of its own (the figure has it).
func newPlot(xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.X.Label.TextStyle.Font.Size, p.Y.Label.TextStyle.Font.Size = 11, 11
	p.Y.Label.Padding = vg.Points(4)
	return p
}

// errPoints are points with a min–max spread around each.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// lineSpec is one chart of a measure against the number of contenders.
type lineSpec struct {
	file, title, ylabel string
	y                   func(*summary) spread
	target              float64 // leasehold's target, drawn as a line; 0: none
}

// lineChart draws spec.y of every lock against the contenders: a line
// through the medians and, when the runs differ, a bar from the lowest to
// the highest run. The axes are fitted to the data (see fitAxis); with bars
// the locks' points are set a little apart so that their bars do not hide
// each other.
func lineChart(path string, ss []*summary, ctx string, spec lineSpec) error {
	type pt struct {
		x float64
		y spread
	}
	byLock := map[string][]pt{}
	var locks []string
	var xs, ys []float64
	xlabel := map[float64]string{}
	if spec.target > 0 {
		ys = append(ys, spec.target)
	}
	bars := false
	for _, s := range ss {
		y := spec.y(s)
		if y.N == 0 {
			continue
		}
		if _, ok := byLock[s.Lock]; !ok {
			locks = append(locks, s.Lock)
		}
		x := float64(s.Contenders)
		byLock[s.Lock] = append(byLock[s.Lock], pt{x, y})
		if _, ok := xlabel[x]; !ok {
			xs = append(xs, x)
			xlabel[x] = fmt.Sprintf("%d×%d", s.Procs, s.Goroutines)
		}
		ys = append(ys, y.Min, y.Max)
		bars = bars || y.varies()
	}
	if len(locks) == 0 {
		return nil
	}
	yfit := fitAxis(slices.Min(ys), slices.Max(ys))
	slices.Sort(xs)
	xfit := fitAxis(xs[0], xs[len(xs)-1])

	p := newPlot("contenders (processes × goroutines)", spec.ylabel)
	leg := newLegend()
	for i, lock := range locks {
		pts := byLock[lock]
		slices.SortFunc(pts, func(a, b pt) int { return cmp.Compare(a.x, b.x) })
		xys := make(plotter.XYs, 0, len(pts))
		errs := make(plotter.YErrors, 0, len(pts))
		for _, q := range pts {
			if yfit.Log && q.y.Median <= 0 {
				continue
			}
			x := q.x
			if bars {
				x = dodge(x, i, len(locks), xfit)
			}
			xys = append(xys, plotter.XY{X: x, Y: q.y.Median})
			errs = append(errs, struct{ Low, High float64 }{q.y.Median - q.y.Min, q.y.Max - q.y.Median})
		}
		c, dashes, glyph := lockStyle(lock)
		line, scatter, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, line.Dashes, line.Width = c, dashes, vg.Points(1.5)
		scatter.Color, scatter.Shape, scatter.Radius = c, glyph, vg.Points(3.5)
		p.Add(line, scatter)
		if bars {
			eb, err := plotter.NewYErrorBars(errPoints{xys, errs})
			if err != nil {
				return err
			}
			eb.Color, eb.Width, eb.CapWidth = c, vg.Points(1), vg.Points(6)
			p.Add(eb)
		}
		leg.Add(lock, line, scatter)
	}
	if spec.target > 0 {
		t, err := plotter.NewLine(plotter.XYs{{X: xfit.Min, Y: spec.target}, {X: xfit.Max, Y: spec.target}})
		if err != nil {
			return err
		}
		t.Color, t.Dashes, t.Width = grey, []vg.Length{vg.Points(6), vg.Points(3)}, vg.Points(1.2)
		p.Add(t)
		leg.Add(fmt.Sprintf("target for leasehold:\n≤ %g ms", spec.target), t)
	}
	yfit.apply(&p.Y)
	if yfit.Log {
		p.Y.Label.Text += ", log scale"
	}
	xfit.apply(&p.X)
	// The contender counts measured, not round numbers, label the x axis.
	p.X.Tick.Marker = valueTicks{values: xs, labels: labelsOf(xs, xlabel)}
	f := &figure{title: spec.title, context: ctx, plot: p, legend: leg}
	return f.save(path, 5*vg.Inch)
}

func labelsOf(xs []float64, label map[float64]string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%g\n%s", x, label[x])
	}
	return out
}

// dodge moves lock i of n a little to the side of x (by 1.2% of the axis
// per lock, in the axis's own space), the locks centred on x.
func dodge(x float64, i, n int, fit axisFit) float64 {
	span := fit.transform(fit.Max) - fit.transform(fit.Min)
	off := (float64(i) - float64(n-1)/2) * 0.012 * span
	return fit.untransform(fit.transform(x) + off)
}

// fairnessChart draws, at the highest contention the runs have, each
// contender's grants ÷ its fair share, sorted from the least served: a
// fair lock's line is flat at 1, an unfair one starts low on the left and
// ends high on the right. The legend gives each lock's Jain index and
// smallest share (medians over the runs); lines mark the fair share and
// leasehold's target for the smallest.
func fairnessChart(path string, ss []*summary, ctx string) error {
	var at *summary
	for _, s := range ss {
		if len(s.Shares) > 0 && (at == nil || s.Contenders > at.Contenders) {
			at = s
		}
	}
	if at == nil {
		return nil // results from before shares were recorded
	}
	var level []*summary
	lo, hi := targetMinShare, 1.0
	bars := false
	for _, s := range ss {
		if s.Procs == at.Procs && s.Goroutines == at.Goroutines && len(s.Shares) > 0 {
			level = append(level, s)
			for _, sh := range s.Shares {
				lo, hi = min(lo, sh.Min), max(hi, sh.Max)
				bars = bars || sh.varies()
			}
		}
	}
	n := len(at.Shares)
	p := newPlot("contenders, from the least served to the most", "grants ÷ fair share (1 = fair)")
	leg := newLegend()
	xfit := axisFit{Min: 0.5, Max: float64(n) + 0.5}
	for i, s := range level {
		xys := make(plotter.XYs, len(s.Shares))
		errs := make(plotter.YErrors, len(s.Shares))
		for r, sh := range s.Shares {
			x := float64(r + 1)
			if bars {
				x = dodge(x, i, len(level), xfit)
			}
			xys[r] = plotter.XY{X: x, Y: sh.Median}
			errs[r] = struct{ Low, High float64 }{sh.Median - sh.Min, sh.Max - sh.Median}
		}
		c, dashes, glyph := lockStyle(s.Lock)
		line, scatter, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, line.Dashes, line.Width = c, dashes, vg.Points(1.5)
		scatter.Color, scatter.Shape, scatter.Radius = c, glyph, vg.Points(3)
		p.Add(line)
		if n <= 64 {
			p.Add(scatter) // more glyphs than that are a smear
		}
		if bars {
			eb, err := plotter.NewYErrorBars(errPoints{xys, errs})
			if err != nil {
				return err
			}
			eb.Color, eb.Width, eb.CapWidth = c, vg.Points(1), vg.Points(4)
			p.Add(eb)
		}
		leg.Add(fmt.Sprintf("%s\nJain %.3f, smallest %.2f", s.Lock, s.Jain.Median, s.MinShare.Median), line, scatter)
	}
	for _, ref := range []struct {
		y      float64
		label  string
		dashes []vg.Length
	}{
		{1, "fair share", nil},
		{targetMinShare, fmt.Sprintf("target for leasehold:\nsmallest ≥ %g, Jain ≥ %g", targetMinShare, targetJain), []vg.Length{vg.Points(6), vg.Points(3)}},
	} {
		l, err := plotter.NewLine(plotter.XYs{{X: xfit.Min, Y: ref.y}, {X: xfit.Max, Y: ref.y}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = grey, ref.dashes, vg.Points(1.2)
		p.Add(l)
		leg.Add(ref.label, l)
	}
	yfit := fitLinear(lo, hi)
	yfit.apply(&p.Y)
	xfit.apply(&p.X)
	if n <= 16 {
		xs := make([]float64, n)
		labels := make([]string, n)
		for i := range xs {
			xs[i], labels[i] = float64(i+1), fmt.Sprint(i+1)
		}
		p.X.Tick.Marker = valueTicks{values: xs, labels: labels}
	}
	title := fmt.Sprintf("Fairness at %d×%d: grants per contender ÷ the fair share, sorted — flat at 1 is best", at.Procs, at.Goroutines)
	f := &figure{title: title, context: ctx, plot: p, legend: leg}
	return f.save(path, 5*vg.Inch)
}

// safetyPanel draws a table per lock and procs×g: overlapping holdings and
// refused fenced writes (both must be 0) and fallback wakes (grants a waiter
// took by its own poll, not by a hand-off notice: lower is better), totals
// over the runs, and the safety verdict: ok, FAILURE for leasehold, finding
// for a peer. Above a limit of 1 the overlaps are holdings beyond the limit
// and the refusals tokens out of order (see checkSafety).
func safetyPanel(path string, ss []*summary, ctx string, limit int) error {
	head := []string{"lock", "procs×g", "runs", "overlaps", "fenced writes refused", "fallback wakes", "safety"}
	notes := []string{
		"overlaps: two holders of one name at once. fenced writes refused: a holder wrote a token older than one",
		"already written. Both must be 0. fallback wakes: grants a waiter took by its own poll (after an expiry or a",
		"lost notice), not by a hand-off notice (leasehold.handoffs, via=poll): lower is better. n/a: not counted.",
	}
	if limit > 1 {
		head[4] = "tokens out of order"
		notes = []string{
			fmt.Sprintf("overlaps: holdings that began while %d holders of their name were live. tokens out of order: a", limit),
			"holding's token not above one granted before its acquire was called, or repeated. Both must be 0.",
			"fallback wakes: grants a waiter took by its own poll (after an expiry or a lost notice), not by a hand-off",
			"notice (leasehold.handoffs, via=poll): lower is better. n/a: not counted.",
		}
	}
	type cell struct {
		s string
		c color.Color
	}
	rows := [][]cell{}
	for _, s := range ss {
		fb := "n/a"
		if s.FallbackWakes != nil {
			fb = fmt.Sprint(*s.FallbackWakes)
		}
		bad := func(n int) cell {
			if n > 0 {
				return cell{fmt.Sprint(n), red}
			}
			return cell{"0", black}
		}
		verdict := cell{"ok", green}
		switch {
		case s.Overlaps+s.Rejections > 0 && s.Peer:
			verdict = cell{"finding (a peer)", amber}
		case s.Overlaps+s.Rejections > 0:
			verdict = cell{"FAILURE", red}
		}
		rows = append(rows, []cell{{s.Lock, black}, {fmt.Sprintf("%d×%d", s.Procs, s.Goroutines), black}, {fmt.Sprint(s.Runs), black},
			bad(s.Overlaps), bad(s.Rejections), {fb, black}, verdict})
	}
	hs := textStyle(11, black)
	bs := textStyle(11, black)
	gap := vg.Points(18)
	widths := make([]vg.Length, len(head))
	for i, h := range head {
		widths[i] = hs.Width(h)
		for _, r := range rows {
			widths[i] = max(widths[i], bs.Width(r[i].s))
		}
	}
	rowH := bs.Height("0") + vg.Points(6)
	ns := textStyle(9, grey)
	title := "Safety per lock — overlaps and refused fenced writes must be 0"
	if limit > 1 {
		title = "Safety per lock — overlaps and tokens out of order must be 0"
	}
	pad := vg.Points(8)
	height := titleHeight(title, ctx, pad) + pad + rowH*vg.Length(len(rows)+1) + vg.Points(6) + ns.Height("x")*vg.Length(len(notes)) + 2*pad
	img := vgimg.NewWith(vgimg.UseWH(figWidth, height), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	y := dc.Max.Y - drawTitle(&dc, title, ctx, pad) - pad
	var total vg.Length
	for _, w := range widths {
		total += w + gap
	}
	x0 := max(pad, (dc.Max.X-total+gap)/2)
	drawRow := func(cells []cell, sty text.Style) {
		x := x0
		for i, c := range cells {
			st := sty
			st.Color = c.c
			st.YAlign = draw.YTop
			if i >= 2 && i < len(cells)-1 { // numbers right-aligned under their heading
				st.XAlign = draw.XRight
				dc.FillText(st, vg.Point{X: x + widths[i], Y: y}, c.s)
			} else {
				dc.FillText(st, vg.Point{X: x, Y: y}, c.s)
			}
			x += widths[i] + gap
		}
		y -= rowH
	}
	hc := make([]cell, len(head))
	for i, h := range head {
		hc[i] = cell{h, black}
	}
	drawRow(hc, hs)
	dc.StrokeLine2(draw.LineStyle{Color: grey, Width: vg.Points(0.8)}, x0, y+vg.Points(4), x0+total-gap, y+vg.Points(4))
	for _, r := range rows {
		drawRow(r, bs)
	}
	y -= vg.Points(6)
	ns.YAlign = draw.YTop
	for _, n := range notes {
		dc.FillText(ns, vg.Point{X: x0, Y: y}, n)
		y -= ns.Height(n)
	}
	return writePNG(path, img)
}
