// Command scalechart draws the scale runs of BENCHMARKS.md: heap per held
// lease and CPU per second of renewals, one group of bars per run, one bar per
// system. It reads a CSV of run,system,heap_bytes_per_lease,cpu_percent rows
// (figures from the bench's -scale runs) and writes heap.png and cpu.png.
//
//	go -C bench run ./scalechart -in results/scale-chart-2026-12-02.csv -out results/scale-2026-12-02
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func main() {
	in := flag.String("in", "", "the CSV of run,system,heap_bytes_per_lease,cpu_percent rows")
	out := flag.String("out", ".", "directory for heap.png and cpu.png")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "scalechart:", err)
		os.Exit(1)
	}
}

// table is the CSV: runs and systems in order of first appearance, and each
// (run, system)'s two figures.
type table struct {
	runs, systems []string
	heap, cpu     map[[2]string]float64
}

func read(path string) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, err
	}
	t := &table{heap: map[[2]string]float64{}, cpu: map[[2]string]float64{}}
	for i, r := range rows[min(1, len(rows)):] { // the first row names the columns
		if len(r) != 4 {
			return nil, fmt.Errorf("%s: row %d has %d fields, want run,system,heap_bytes_per_lease,cpu_percent", path, i+2, len(r))
		}
		heap, err1 := strconv.ParseFloat(r[2], 64)
		cpu, err2 := strconv.ParseFloat(r[3], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: row %d: %q and %q must be numbers", path, i+2, r[2], r[3])
		}
		if !slices.Contains(t.runs, r[0]) {
			t.runs = append(t.runs, r[0])
		}
		if !slices.Contains(t.systems, r[1]) {
			t.systems = append(t.systems, r[1])
		}
		t.heap[[2]string{r[0], r[1]}], t.cpu[[2]string{r[0], r[1]}] = heap, cpu
	}
	if len(t.runs) == 0 {
		return nil, fmt.Errorf("%s: no rows", path)
	}
	return t, nil
}

func run(in, out string) error {
	if in == "" {
		return fmt.Errorf("-in: the CSV to draw is required")
	}
	t, err := read(in)
	if err != nil {
		return err
	}
	if err := bars(t, t.heap, "heap per held lease", "bytes", filepath.Join(out, "heap.png")); err != nil {
		return err
	}
	return bars(t, t.cpu, "CPU while renewing", "% of one core", filepath.Join(out, "cpu.png"))
}

// colors of the systems, in order of appearance.
var colors = []color.Color{
	color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff},
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// bars draws one group of bars per run, one bar per system (a system
// missing from a run is a gap).
func bars(t *table, v map[[2]string]float64, title, unit, path string) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(40)
	w := vg.Points(14)
	top := 0.0
	for i, s := range t.systems {
		vals := make(plotter.Values, len(t.runs))
		for j, r := range t.runs {
			vals[j] = v[[2]string{r, s}]
			top = max(top, vals[j])
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.LineStyle.Width = 0
		b.Color = colors[i%len(colors)]
		b.Offset = w * vg.Length(float64(i)-float64(len(t.systems)-1)/2)
		p.Add(b)
		p.Legend.Add(s, b)
	}
	p.NominalX(t.runs...)
	p.Y.Min, p.Y.Max = 0, top*1.35 // room for the legend above the bars
	return p.Save(vg.Length(110*len(t.runs))+2*vg.Inch, 4*vg.Inch, path)
}
