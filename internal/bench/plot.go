package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// A figure is a row of panels, each panelW × panelH pixels in its PNG
// (figureDPI dots per inch) and as many inches in its SVG.
const (
	panelW, panelH = 480, 420
	figureDPI      = 96
)

var (
	grey   = color.RGBA{120, 120, 120, 255}
	blue   = color.RGBA{20, 70, 200, 255}
	green  = color.RGBA{20, 140, 60, 255}
	red    = color.RGBA{200, 30, 30, 255}
	orange = color.RGBA{230, 140, 0, 255}
)

// WritePNG draws the report as the paper's Figure 3 (figurePanels), as PNG.
func (r *Report) WritePNG(w io.Writer) error { return writeFigure(w, "png", r.figurePanels()) }

// WriteSVG draws the same figure as SVG.
func (r *Report) WriteSVG(w io.Writer) error { return writeFigure(w, "svg", r.figurePanels()) }

// writeFigure draws panels side by side into w, as "png" or "svg".
func writeFigure(w io.Writer, format string, panels []*plot.Plot) error {
	width := vg.Length(max(len(panels), 1)*panelW) * vg.Inch / figureDPI
	height := vg.Length(panelH) * vg.Inch / figureDPI
	var c vg.CanvasWriterTo
	switch format {
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(figureDPI), vgimg.UseBackgroundColor(color.White))}
	case "svg":
		c = vgsvg.New(width, height)
	default:
		return fmt.Errorf("figure: format %q is not png or svg", format)
	}
	if len(panels) > 0 {
		tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Centimeter, PadTop: vg.Millimeter * 3,
			PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
		for i, dc := range plot.Align([][]*plot.Plot{panels}, tiles, draw.New(c))[0] {
			panels[i].Draw(dc)
		}
	}
	_, err := c.WriteTo(w)
	return err
}

var panelTitle = map[Workload]string{Reads: "Reads", Writes: "Writes", Appends: "Record appends"}
var rateLabel = map[Workload]string{Reads: "Read rate (MB/s)", Writes: "Write rate (MB/s)", Appends: "Append rate (MB/s)"}

// figurePanels is the paper's Figure 3: one panel a workload, its network
// limit dashed and the measured aggregate rate solid with markers against
// N; a labelled variant (the writes on small chunks) is a second series
// in its workload's panel.
func (r *Report) figurePanels() []*plot.Plot {
	var out []*plot.Plot
	for _, wl := range Workloads {
		head, variant := r.series(wl, false), r.series(wl, true)
		if len(head) == 0 && len(variant) == 0 {
			continue
		}
		p := plot.New()
		if len(head) == 0 {
			head, variant = variant, nil
		}
		p.Title.Text = fmt.Sprintf("(%c) %s, %s chunks", 'a'+len(out), panelTitle[wl], chunkLabel(head[0].ChunkSize))
		p.X.Label.Text, p.Y.Label.Text = "Number of clients N", rateLabel[wl]
		p.X.Min, p.Y.Min = 0, 0
		p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
		p.Legend.XOffs, p.Legend.YOffs = -vg.Millimeter*2, vg.Millimeter*2 // bottom right, clear of the axes
		p.Add(plotter.NewGrid())
		limit, _ := plotter.NewLine(r.limitLine(wl, head))
		limit.Color, limit.Dashes, limit.Width = grey, []vg.Length{vg.Points(6), vg.Points(4)}, vg.Points(1.5)
		p.Add(limit)
		p.Legend.Add("Network limit", limit)
		label := "Aggregate rate"
		if len(variant) > 0 {
			label += ", " + chunkLabel(head[0].ChunkSize) + " chunks"
		}
		addRate(p, head, label, blue)
		if len(variant) > 0 {
			addRate(p, variant, "Aggregate rate, "+chunkLabel(variant[0].ChunkSize)+" chunks (variant)", green)
		}
		top := 0.0
		for _, pt := range slices.Concat(head, variant) {
			top = max(top, pt.Limit, pt.Aggregate)
		}
		p.Y.Max = top * 1.15
		out = append(out, p)
	}
	return out
}

// series returns the completed points of one workload's headline, or of
// its variant, in order of N.
func (r *Report) series(wl Workload, variant bool) []Point {
	var out []Point
	for _, p := range r.Points {
		if p.Workload == wl && p.Variant == variant && p.Err == "" {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Point) int { return a.Clients - b.Clients })
	return out
}

// limitLine is a panel's network limit: where every point's limit follows
// the workload's fixed rule, at every N up to the largest (so that the
// line bends where the rule does); otherwise (appends limited by the
// servers that received their records) through the points' own limits.
func (r *Report) limitLine(wl Workload, pts []Point) plotter.XYs {
	net := Network{NIC: Rate(r.NICMbit) * Mbit, Link: Rate(r.LinkMbit) * Mbit, Chunkservers: r.Servers, Replicas: r.Replicas}
	var xys plotter.XYs
	if !slices.ContainsFunc(pts, func(p Point) bool { return p.LimitRule != "" && p.LimitRule != net.Rule(wl) }) {
		for n := 1; n <= pts[len(pts)-1].Clients; n++ {
			xys = append(xys, plotter.XY{X: float64(n), Y: net.Limit(wl, n)})
		}
		return xys
	}
	for _, p := range pts {
		xys = append(xys, plotter.XY{X: float64(p.Clients), Y: p.Limit})
	}
	return xys
}

// plainTicks are plot.DefaultTicks labelled without trailing zeros.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(math.Round(ts[i].Value*1e6)/1e6, 'g', -1, 64)
		}
	}
	return ts
}

// addRate adds the measured rates of pts to p as a line with markers.
func addRate(p *plot.Plot, pts []Point, label string, c color.Color) {
	xys := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		xys[i] = plotter.XY{X: float64(pt.Clients), Y: pt.Aggregate}
	}
	line, marks, _ := plotter.NewLinePoints(xys)
	line.Color, line.Width = c, vg.Points(2)
	marks.Color, marks.Shape, marks.Radius = c, draw.BoxGlyph{}, vg.Points(3)
	p.Add(line, marks)
	p.Legend.Add(label, line, marks)
}
