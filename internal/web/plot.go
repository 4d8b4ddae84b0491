package web

import (
	"fmt"
	"strings"

	"github.com/chunkfs/chunkfs/internal/status"
)

// Plot is a small line chart of the last hour, drawn as inline SVG by the
// plot template: a polyline in a fixed view box that the stylesheet
// scales to the page's width.
type Plot struct {
	Title  string
	Points string // SVG polyline points
	Max    string // the value at the top of the chart, formatted
	Latest string
	Empty  bool
}

// Plot view box.
const (
	plotW = 360.0
	plotH = 80.0
)

// newPlot plots value of each point of h, formatted by format.
func newPlot(title string, h []status.Point, value func(status.Rate) float64, format func(float64) string) Plot {
	p := Plot{Title: title, Empty: len(h) < 2, Max: format(0), Latest: format(0)}
	if p.Empty {
		return p
	}
	top := 0.0
	for _, pt := range h {
		top = max(top, value(pt.Rate))
	}
	p.Max, p.Latest = format(top), format(value(h[len(h)-1].Rate))
	if top == 0 {
		top = 1
	}
	var b strings.Builder
	start, span := h[0].At, h[len(h)-1].At.Sub(h[0].At).Seconds()
	for _, pt := range h {
		x := plotW * pt.At.Sub(start).Seconds() / span
		y := plotH - plotH*value(pt.Rate)/top
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	p.Points = strings.TrimSpace(b.String())
	return p
}

func byteRate(v float64) string { return status.Bytes(int64(v)) + "/s" }
func opRate(v float64) string   { return fmt.Sprintf("%.1f ops/s", v) }
