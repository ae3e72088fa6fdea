package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plots: p99 vs load per distribution (short requests and all requests
// side by side, log scale, SLO line), the fairness split over time, and
// the CDF of the hog probe lateness.

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, // blue
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 255}, // green
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 255}, // purple
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}, // red
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 255}, // orange
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 255}, // brown
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 255}, // grey
	color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 255}, // teal
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 255}, // pink
}

func colorOf(i int) color.Color { return palette[i%len(palette)] }

// durTicks labels a log axis of nanoseconds with readable durations.
type durTicks struct{}

func (durTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 {
		min = 1
	}
	if max <= min {
		max = min * 10
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		v := math.Pow(10, e)
		ticks = append(ticks, plot.Tick{Value: v, Label: tickLabel(v)})
		for k := 2; k < 10; k++ {
			ticks = append(ticks, plot.Tick{Value: v * float64(k)})
		}
	}
	return ticks
}

// tickLabel prints a power of ten of nanoseconds as "1 µs", "10 ms", ...
func tickLabel(ns float64) string {
	units := []struct {
		div  float64
		name string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}, {1, "ns"}}
	for _, u := range units {
		if ns >= u.div {
			return strconv.FormatFloat(ns/u.div, 'g', 3, 64) + " " + u.name
		}
	}
	return strconv.FormatFloat(ns, 'g', 3, 64) + " ns"
}

// writePlots renders every plot the results allow; it returns the file
// names written and the errors met (a plot failure never fails the run).
func writePlots(dir string, r *Results) (names []string, errs []string) {
	try := func(name string, f func(string) error) {
		path := filepath.Join(dir, name)
		if err := f(path); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			return
		}
		names = append(names, name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, []string{err.Error()}
	}
	if r.Tail != nil {
		for _, d := range r.Config.Dists {
			d := d
			try("tail_"+d+".png", func(p string) error { return plotTail(p, r.Tail, d) })
		}
	}
	if r.Fair != nil {
		try("fair.png", func(p string) error { return plotFair(p, r.Fair) })
	}
	if r.Hog != nil {
		try("hog.png", func(p string) error { return plotHog(p, r.Hog) })
	}
	if r.Batch != nil {
		try("batch.png", func(p string) error { return plotBatch(p, r.Batch) })
	}
	return names, errs
}

func saveTiles(path string, plots [][]*plot.Plot, w, h vg.Length) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]),
		PadX: vg.Points(12), PadY: vg.Points(12),
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canv := plot.Align(plots, t, dc)
	for i := range plots {
		for j := range plots[i] {
			if plots[i][j] != nil {
				plots[i][j].Draw(canv[i][j])
			}
		}
	}
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

func plotTail(path string, t *TailResults, dist string) error {
	var panels []*plot.Plot
	var slo float64
	for _, which := range []string{"short requests", "all requests"} {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: p99 sojourn, %s", dist, which)
		p.X.Label.Text = "load (% of capacity)"
		p.Y.Label.Text = "p99 sojourn"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = durTicks{}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		p.Add(plotter.NewGrid())
		ymin, ymax := math.Inf(1), 0.0
		type dnf struct {
			x  float64
			ci int
		}
		var unfinished []dnf
		for ci, c := range t.Contenders {
			var xy plotter.XYs
			for _, pt := range t.Points {
				if pt.Dist != dist || pt.Contender != c.Key || !pt.ok() {
					continue
				}
				slo = float64(pt.SLO)
				v := pt.All.P99
				if which == "short requests" {
					v = pt.Short.P99
				}
				if v == incomplete {
					unfinished = append(unfinished, dnf{100 * pt.Load, ci})
					continue
				}
				if v <= 0 {
					continue
				}
				xy = append(xy, plotter.XY{X: 100 * pt.Load, Y: float64(v)})
				ymin, ymax = math.Min(ymin, float64(v)), math.Max(ymax, float64(v))
				// error bar: min–max over the kept repetitions
				lo, hi := pt.AllP99Min, pt.AllP99Max
				if which == "short requests" {
					lo, hi = pt.ShortP99Min, pt.ShortP99Max
				}
				if hi > lo && lo > 0 && hi != incomplete {
					x := 100*pt.Load + 0.6*float64(ci-len(t.Contenders)/2)
					if bar, err := plotter.NewLine(plotter.XYs{{X: x, Y: float64(lo)}, {X: x, Y: float64(hi)}}); err == nil {
						bar.Color = colorOf(ci)
						bar.Width = vg.Points(1)
						p.Add(bar)
						ymin, ymax = math.Min(ymin, float64(lo)), math.Max(ymax, float64(hi))
					}
				}
			}
			if len(xy) == 0 {
				continue
			}
			sort.Slice(xy, func(i, j int) bool { return xy[i].X < xy[j].X })
			l, s, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			l.Color, s.Color = colorOf(ci), colorOf(ci)
			l.Width = vg.Points(1.5)
			if c.Kind != "xtc" {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			p.Add(l, s)
			p.Legend.Add(c.Label, l, s)
		}
		if slo > 0 {
			ymin, ymax = math.Min(ymin, slo), math.Max(ymax, slo)
			line, err := plotter.NewLine(plotter.XYs{{X: 0, Y: slo}, {X: 100, Y: slo}})
			if err == nil {
				line.Color = color.Gray{Y: 0x60}
				line.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
				p.Add(line)
				p.Legend.Add("SLO (200× mean)", line)
			}
		}
		if ymax > 0 {
			p.Y.Min, p.Y.Max = ymin/2, ymax*8 // headroom for the legend
		} else {
			p.Y.Min, p.Y.Max = 1e3, 1e9
		}
		// Points whose p99 request never completed: a cross on the top edge.
		for _, u := range unfinished {
			sc, err := plotter.NewScatter(plotter.XYs{{X: u.x, Y: p.Y.Max / 1.5}})
			if err != nil {
				return err
			}
			sc.GlyphStyle.Shape = draw.CrossGlyph{}
			sc.GlyphStyle.Color = colorOf(u.ci)
			sc.GlyphStyle.Radius = vg.Points(4)
			p.Add(sc)
		}
		if len(unfinished) > 0 {
			p.Title.Text += " (× = did not finish)"
		}
		p.X.Min, p.X.Max = 0, 100
		panels = append(panels, p)
	}
	return saveTiles(path, [][]*plot.Plot{panels}, 28*vg.Centimeter, 11*vg.Centimeter)
}

func plotFair(path string, f *FairResults) error {
	var rows [][]*plot.Plot
	names := [3]string{"600 shares", "300 shares", "100 shares"}
	for _, s := range f.Series {
		p := plot.New()
		p.Title.Text = s.Label
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = "CPU fraction"
		p.Y.Min, p.Y.Max = 0, 1
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		if !s.ok() {
			p.Title.Text = s.Label + ": " + s.Status
		}
		for k := 0; k < 3; k++ {
			var xy plotter.XYs
			for i, t := range s.Times {
				xy = append(xy, plotter.XY{X: t, Y: s.Fractions[i][k]})
			}
			if len(xy) > 0 {
				l, err := plotter.NewLine(xy)
				if err != nil {
					return err
				}
				l.Color = colorOf(k)
				l.Width = vg.Points(1.5)
				p.Add(l)
				p.Legend.Add(names[k], l)
			}
			tl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: f.Target[k]},
				{X: math.Max(lastOr(s.Times, 1), 0.1), Y: f.Target[k]}})
			if err == nil {
				tl.Color = colorOf(k)
				tl.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
				p.Add(tl)
			}
		}
		rows = append(rows, []*plot.Plot{p})
	}
	if len(rows) == 0 {
		return fmt.Errorf("no series")
	}
	return saveTiles(path, rows, 20*vg.Centimeter, vg.Length(len(rows))*7*vg.Centimeter)
}

func lastOr(v []float64, d float64) float64 {
	if len(v) == 0 {
		return d
	}
	return v[len(v)-1]
}

func plotHog(path string, h *HogResults) error {
	p := plot.New()
	p.Title.Text = "1 ms-sleep probe lateness next to a never-yielding kernel (CDF)"
	p.X.Label.Text = "lateness"
	p.Y.Label.Text = "fraction of probes ≤ x"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = durTicks{}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	xmin, xmax := math.Inf(1), 0.0
	n := 0
	for i, s := range h.Series {
		if !s.ok() || len(s.Samples) == 0 {
			continue
		}
		v := append([]int64(nil), s.Samples...)
		sort.Slice(v, func(a, b int) bool { return v[a] < v[b] })
		xy := make(plotter.XYs, 0, len(v))
		for j, x := range v {
			fx := math.Max(float64(x), 1000) // clamp below 1 µs for the log axis
			xy = append(xy, plotter.XY{X: fx, Y: float64(j+1) / float64(len(v))})
			xmin, xmax = math.Min(xmin, fx), math.Max(xmax, fx)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = colorOf(i)
		l.Width = vg.Points(1.5)
		if s.Key == "xtc-idle" || s.Key == "go-idle" {
			l.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(s.Label, l)
		n++
	}
	if n == 0 {
		xmin, xmax = 1e3, 1e7
	}
	p.X.Min, p.X.Max = xmin/1.5, xmax*1.5
	return p.Save(24*vg.Centimeter, 12*vg.Centimeter, path)
}
