package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
)

var (
	red    = color.RGBA{200, 30, 30, 255}
	orange = color.RGBA{230, 140, 0, 255}
)

// WritePNG draws replicas over time, one panel a failure: the watched
// chunks with one and with two live replicas against the seconds since the
// kill, the master's detection of the failure as a dashed line.
func (r *RecoveryReport) WritePNG(w io.Writer) error {
	img := image.NewRGBA(image.Rect(0, 0, max(1, len(r.Phases))*panelW, panelH))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	for i, p := range r.Phases {
		title := fmt.Sprintf("(%c) 1 of %d chunkservers killed", 'a'+i, r.Servers)
		if i > 0 {
			title = fmt.Sprintf("(%c) %d more killed, %d of %d left", 'a'+i, len(p.Killed), p.Survivors, r.Servers)
		}
		p.drawPanel(img, image.Pt(i*panelW, 0), r.Replicas, title)
	}
	return png.Encode(w, img)
}

func (p *RecoveryPhase) drawPanel(img *image.RGBA, origin image.Point, replicas int, title string) {
	yTop := 1.0
	for _, s := range p.Samples {
		for k := 1; k < min(replicas, len(s.ByReplicas)); k++ {
			yTop = max(yTop, float64(s.ByReplicas[k]))
		}
	}
	xStep, xMax := niceAxis(max(p.HealedS, 1))
	yStep, yMax := niceAxis(yTop * 1.1)
	a := plotArea{rect: image.Rect(origin.X+marginL, origin.Y+marginT, origin.X+panelW-marginR, origin.Y+panelH-marginB), xMax: xMax, yMax: yMax}
	timeAxes(img, a, xStep, yStep)
	drawText(img, image.Pt(a.rect.Min.X+a.rect.Dx()/2-textWidth(title)/2, origin.Y+marginT/2+4), title, black)
	det := a.pt(p.DetectedS, 0)
	polyline(img, []image.Point{det, image.Pt(det.X, a.rect.Min.Y)}, grey, true)
	colours := []color.RGBA{red, orange}
	for k := 1; k < min(replicas, 3); k++ {
		var line []image.Point
		for _, s := range p.Samples {
			if t := float64(s.AtNS-p.KillNS) / 1e9; t >= 0 && s.Err == "" && k < len(s.ByReplicas) {
				line = append(line, a.pt(t, float64(s.ByReplicas[k])))
			}
		}
		polyline(img, line, colours[k-1], false)
	}
	at := image.Pt(a.rect.Min.X, origin.Y+panelH-22)
	for k, label := range []string{"1 replica", "2 replicas", "failure detected"} {
		c := grey
		if k < 2 {
			c = colours[k]
		}
		m := at.Add(image.Pt(130*k, 0))
		polyline(img, []image.Point{m, m.Add(image.Pt(24, 0))}, c, k == 2)
		drawText(img, m.Add(image.Pt(30, 4)), label, black)
	}
}

// timeAxes draws the grid, the ticks and the labels of a panel over time.
func timeAxes(img *image.RGBA, a plotArea, xStep, yStep float64) {
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
	xl, yl := "Seconds since the kill", "Chunks"
	drawText(img, image.Pt(a.rect.Min.X+a.rect.Dx()/2-textWidth(xl)/2, a.rect.Max.Y+36), xl, black)
	drawTextUp(img, image.Pt(a.rect.Min.X-marginL+6, a.rect.Min.Y+a.rect.Dy()/2+textWidth(yl)/2), yl, black)
}
