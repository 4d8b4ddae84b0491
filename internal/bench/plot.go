package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The figure's geometry and colours.
const (
	panelW, panelH = 480, 420
	marginL        = 70 // room for the y ticks and label
	marginR        = 20
	marginT        = 40 // the panel title
	marginB        = 80 // x ticks, label and legend
)

var (
	white    = color.RGBA{255, 255, 255, 255}
	black    = color.RGBA{0, 0, 0, 255}
	grey     = color.RGBA{150, 150, 150, 255}
	lightRGB = color.RGBA{230, 230, 230, 255}
	blue     = color.RGBA{20, 70, 200, 255}
)

// WritePNG draws the report in the style of the paper's Figure 3: one panel
// per workload, the network limit as a dashed line and the measured
// aggregate rate as a solid line with markers, both against N.
func (r *Report) WritePNG(w io.Writer) error {
	var panels []Workload
	for _, wl := range Workloads {
		if len(r.series(wl)) > 0 {
			panels = append(panels, wl)
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, max(1, len(panels))*panelW, panelH))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	for i, wl := range panels {
		title := fmt.Sprintf("(%c) %s, %s chunks", 'a'+i, panelTitle[wl], chunkLabel(r.series(wl)[0].ChunkSize))
		r.drawPanel(img, image.Pt(i*panelW, 0), wl, title)
	}
	return png.Encode(w, img)
}

var panelTitle = map[Workload]string{Reads: "Reads", Writes: "Writes", Appends: "Record appends"}
var rateLabel = map[Workload]string{Reads: "Read rate (MB/s)", Writes: "Write rate (MB/s)", Appends: "Append rate (MB/s)"}

// series returns the completed points of one workload.
func (r *Report) series(wl Workload) []Point {
	var out []Point
	for _, p := range r.Points {
		if p.Workload == wl && p.Err == "" {
			out = append(out, p)
		}
	}
	return out
}

// plotArea maps data coordinates to pixels within one panel.
type plotArea struct {
	rect       image.Rectangle
	xMax, yMax float64
}

func (a plotArea) pt(x, y float64) image.Point {
	px := a.rect.Min.X + int(math.Round(x/a.xMax*float64(a.rect.Dx())))
	py := a.rect.Max.Y - int(math.Round(y/a.yMax*float64(a.rect.Dy())))
	return image.Pt(px, py)
}

func (r *Report) drawPanel(img *image.RGBA, origin image.Point, wl Workload, title string) {
	pts := r.series(wl)
	net := Network{NIC: Rate(r.NICMbit) * Mbit, Link: Rate(r.LinkMbit) * Mbit, Chunkservers: r.Servers, Replicas: r.Replicas}
	nMax := 0
	yTop := 0.0
	for _, p := range pts {
		nMax = max(nMax, p.Clients)
		yTop = max(yTop, p.Limit, p.Aggregate)
	}
	xStep, xMax := niceAxis(float64(nMax))
	yStep, yMax := niceAxis(yTop * 1.1)
	a := plotArea{
		rect: image.Rect(origin.X+marginL, origin.Y+marginT, origin.X+panelW-marginR, origin.Y+panelH-marginB),
		xMax: xMax, yMax: yMax,
	}
	drawAxes(img, a, xStep, yStep, rateLabel[wl])
	drawText(img, image.Pt(a.rect.Min.X+a.rect.Dx()/2-textWidth(title)/2, origin.Y+marginT/2+4), title, black)
	var limit []image.Point
	for n := 1; n <= nMax; n++ {
		limit = append(limit, a.pt(float64(n), net.Limit(wl, n)))
	}
	polyline(img, limit, grey, true)
	var measured []image.Point
	for _, p := range pts {
		measured = append(measured, a.pt(float64(p.Clients), p.Aggregate))
	}
	polyline(img, measured, blue, false)
	for _, m := range measured {
		fillRect(img, image.Rect(m.X-3, m.Y-3, m.X+4, m.Y+4), blue)
	}
	legend(img, image.Pt(a.rect.Min.X, origin.Y+panelH-22))
}

// niceAxis returns a tick step of 1, 2 or 5 times a power of ten giving
// about five ticks up to at least top, and the axis end (a whole number of
// steps).
func niceAxis(top float64) (step, end float64) {
	if top <= 0 {
		top = 1
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return step, math.Ceil(top/step-1e-9) * step
}

func drawAxes(img *image.RGBA, a plotArea, xStep, yStep float64, yLabel string) {
	for y := 0.0; y <= a.yMax+1e-9; y += yStep {
		p := a.pt(0, y)
		hline(img, a.rect.Min.X, a.rect.Max.X, p.Y, lightRGB)
		s := trimFloat(y)
		drawText(img, image.Pt(a.rect.Min.X-8-textWidth(s), p.Y+4), s, black)
	}
	for x := 0.0; x <= a.xMax+1e-9; x += xStep {
		p := a.pt(x, 0)
		vline(img, p.X, a.rect.Max.Y, a.rect.Max.Y+5, black)
		s := trimFloat(x)
		drawText(img, image.Pt(p.X-textWidth(s)/2, a.rect.Max.Y+18), s, black)
	}
	hline(img, a.rect.Min.X, a.rect.Max.X, a.rect.Max.Y, black)
	vline(img, a.rect.Min.X, a.rect.Min.Y, a.rect.Max.Y, black)
	xl := "Number of clients N"
	drawText(img, image.Pt(a.rect.Min.X+a.rect.Dx()/2-textWidth(xl)/2, a.rect.Max.Y+36), xl, black)
	drawTextUp(img, image.Pt(a.rect.Min.X-marginL+6, a.rect.Min.Y+a.rect.Dy()/2+textWidth(yLabel)/2), yLabel, black)
}

func legend(img *image.RGBA, at image.Point) {
	polyline(img, []image.Point{at, at.Add(image.Pt(30, 0))}, grey, true)
	drawText(img, at.Add(image.Pt(36, 4)), "Network limit", black)
	m := at.Add(image.Pt(170, 0))
	polyline(img, []image.Point{m, m.Add(image.Pt(30, 0))}, blue, false)
	fillRect(img, image.Rect(m.X+12, m.Y-3, m.X+19, m.Y+4), blue)
	drawText(img, m.Add(image.Pt(36, 4)), "Aggregate rate", black)
}

func trimFloat(x float64) string {
	if x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%g", math.Round(x*100)/100)
}

// polyline draws straight segments through pts, two pixels wide, dashed if
// asked.
func polyline(img *image.RGBA, pts []image.Point, c color.RGBA, dashed bool) {
	step := 0
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		n := max(abs(b.X-a.X), abs(b.Y-a.Y), 1)
		for k := 0; k <= n; k++ {
			step++
			if dashed && (step/6)%2 == 1 {
				continue
			}
			x := a.X + (b.X-a.X)*k/n
			y := a.Y + (b.Y-a.Y)*k/n
			fillRect(img, image.Rect(x, y-1, x+1, y+1), c)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	fillRect(img, image.Rect(x0, y, x1+1, y+1), c)
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	fillRect(img, image.Rect(x, y0, x+1, y1+1), c)
}

func fillRect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r.Intersect(img.Bounds()), image.NewUniform(c), image.Point{}, draw.Src)
}

var face = basicfont.Face7x13

func textWidth(s string) int { return font.MeasureString(face, s).Round() }

// drawText draws s with its baseline starting at p.
func drawText(img draw.Image, p image.Point, s string, c color.RGBA) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face, Dot: fixed.P(p.X, p.Y)}
	d.DrawString(s)
}

// drawTextUp draws s rotated a quarter turn anticlockwise, reading upwards
// from p (the bottom-left corner of the rotated text).
func drawTextUp(img *image.RGBA, p image.Point, s string, c color.RGBA) {
	w, h := textWidth(s), face.Height
	tmp := image.NewRGBA(image.Rect(0, 0, w, h))
	drawText(tmp, image.Pt(0, face.Ascent), s, c)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			if px := tmp.RGBAAt(x, y); px.A > 0 {
				img.SetRGBA(p.X+y, p.Y-x, px)
			}
		}
	}
}
