package metrics

import (
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is how Prometheus reads a figure.
type Kind int

// Kinds of figures.
const (
	Gauge Kind = iota
	Counter
)

// Figure is one value a server reports at scrape time: a gauge such as
// the chunks under-replicated, or a counter it keeps itself such as the
// clones completed. Labels are name=value pairs, in a fixed order per
// Name.
type Figure struct {
	Name   string
	Help   string
	Kind   Kind
	Labels []Label
	Value  float64
}

// Label is a label of a Figure.
type Label struct{ Name, Value string }

// Figures registers fn, called at every scrape, as the source of a
// server's figures: the master's chunk counts and Raft state, a
// chunkserver's disks and buffers. The server computes them in its own
// types; nothing is kept here between scrapes. Figures of one name must
// share Help, Kind and label names.
func (r *Registry) Figures(fn func() []Figure) {
	r.reg.MustRegister(figureCollector(fn))
}

// figureCollector is an unchecked collector: its metrics are known only
// when it is scraped.
type figureCollector func() []Figure

func (f figureCollector) Describe(chan<- *prometheus.Desc) {}

func (f figureCollector) Collect(ch chan<- prometheus.Metric) {
	figs := f()
	sort.SliceStable(figs, func(i, j int) bool { return figs[i].Name < figs[j].Name })
	descs := map[string]*prometheus.Desc{}
	for _, fg := range figs {
		names, values := make([]string, len(fg.Labels)), make([]string, len(fg.Labels))
		for i, l := range fg.Labels {
			names[i], values[i] = l.Name, l.Value
		}
		key := fg.Name + "\x00" + strings.Join(names, "\x00")
		d := descs[key]
		if d == nil {
			d = prometheus.NewDesc(fg.Name, fg.Help, names, nil)
			descs[key] = d
		}
		vt := prometheus.GaugeValue
		if fg.Kind == Counter {
			vt = prometheus.CounterValue
		}
		m, err := prometheus.NewConstMetric(d, vt, fg.Value, values...)
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
}
