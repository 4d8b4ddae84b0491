package bench

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WritePNG draws replicas over time, one panel a failure (figurePanels), as
// PNG.
func (r *RecoveryReport) WritePNG(w io.Writer) error { return writeFigure(w, "png", r.figurePanels()) }

// WriteSVG draws the same figure as SVG.
func (r *RecoveryReport) WriteSVG(w io.Writer) error { return writeFigure(w, "svg", r.figurePanels()) }

// figurePanels has a panel a failure: the watched chunks with one and with
// two live replicas against the seconds since the kill, the master's
// detection of the failure as a dashed line.
func (r *RecoveryReport) figurePanels() []*plot.Plot {
	var out []*plot.Plot
	for i, ph := range r.Phases {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("(%c) 1 of %d chunkservers killed", 'a'+i, r.Servers)
		if i > 0 {
			p.Title.Text = fmt.Sprintf("(%c) %d more killed, %d of %d left", 'a'+i, len(ph.Killed), ph.Survivors, r.Servers)
		}
		p.X.Label.Text, p.Y.Label.Text = "Seconds since the kill", "Chunks"
		p.X.Min, p.Y.Min = 0, 0
		p.X.Max = max(ph.HealedS, 1)
		p.Legend.Top = true
		p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
		p.Add(plotter.NewGrid())
		top := 1.0
		for k, c := range []color.Color{red, orange}[:max(min(r.Replicas, 3)-1, 0)] {
			xys := ph.byReplicas(k + 1)
			for _, xy := range xys {
				top = max(top, xy.Y)
			}
			line, _ := plotter.NewLine(xys)
			line.Color, line.Width = c, vg.Points(2)
			p.Add(line)
			p.Legend.Add([]string{"1 replica", "2 replicas"}[k], line)
		}
		p.Y.Max = top * 1.35 // room for the legend above the lines
		det, _ := plotter.NewLine(plotter.XYs{{X: ph.DetectedS, Y: 0}, {X: ph.DetectedS, Y: p.Y.Max}})
		det.Color, det.Dashes, det.Width = grey, []vg.Length{vg.Points(6), vg.Points(4)}, vg.Points(1.5)
		p.Add(det)
		p.Legend.Add("failure detected", det)
		out = append(out, p)
	}
	return out
}

// byReplicas is, over the seconds since the kill, how many watched chunks
// had k live replicas, from the samples that succeeded.
func (ph *RecoveryPhase) byReplicas(k int) plotter.XYs {
	var xys plotter.XYs
	for _, s := range ph.Samples {
		if t := float64(s.AtNS-ph.KillNS) / 1e9; t >= 0 && s.Err == "" && k < len(s.ByReplicas) {
			xys = append(xys, plotter.XY{X: t, Y: float64(s.ByReplicas[k])})
		}
	}
	return xys
}
