package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/metrics"
	"github.com/chunkfs/chunkfs/internal/status"
)

// ChunkserverConfig configures a chunkserver's HTTP server.
type ChunkserverConfig struct {
	Figures func() chunkserver.Figures
	Metrics *metrics.Registry // served at /metrics; nil: none
	Pprof   bool
	Recent  *Recent // the server's last warnings and errors; nil: none shown
	Clock   clock.Clock
	Logger  *slog.Logger
}

// Chunkserver is a chunkserver's HTTP server: its page, /metrics and
// /debug/pprof.
type Chunkserver struct {
	cfg ChunkserverConfig
	mux *http.ServeMux

	mu    sync.Mutex // guards rates
	rates status.Rates
}

// NewChunkserver returns a chunkserver's HTTP server. Its figures register
// with cfg.Metrics.
func NewChunkserver(cfg ChunkserverConfig) (*Chunkserver, error) {
	if cfg.Figures == nil || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("web: chunkserver page needs Figures, Clock and Logger")
	}
	c := &Chunkserver{cfg: cfg, mux: http.NewServeMux()}
	common(c.mux, cfg.Metrics, cfg.Pprof)
	c.mux.HandleFunc("GET /{$}", c.page)
	if cfg.Metrics != nil {
		cfg.Metrics.Figures(func() []metrics.Figure { return chunkserverFigures(cfg.Figures()) })
	}
	c.sample(cfg.Figures())
	return c, nil
}

// ServeHTTP serves the page.
func (c *Chunkserver) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

func (c *Chunkserver) sample(f chunkserver.Figures) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rates.Record(c.cfg.Clock.Now(), status.Totals{ReadBytes: f.BytesRead, WrittenBytes: f.BytesWritten})
}

// Run samples the server's throughput every status.Step until ctx ends.
func (c *Chunkserver) Run(ctx context.Context) {
	t := c.cfg.Clock.NewTicker(status.Step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.sample(c.cfg.Figures())
		}
	}
}

type chunkserverPage struct {
	Title  string
	Now    time.Time
	F      chunkserver.Figures
	Minute status.Rate
	Hour   status.Rate
	Plots  []Plot
	Recent []LogEntry
}

func (c *Chunkserver) page(w http.ResponseWriter, r *http.Request) {
	f := c.cfg.Figures()
	c.sample(f)
	c.mu.Lock()
	p := chunkserverPage{Title: "chunkfs chunkserver " + f.ID, Now: c.cfg.Clock.Now(), F: f,
		Minute: c.rates.Over(time.Minute), Hour: c.rates.Over(time.Hour), Recent: c.cfg.Recent.Entries()}
	h := c.rates.History()
	c.mu.Unlock()
	p.Plots = []Plot{
		newPlot("Read rate", h, func(r status.Rate) float64 { return r.ReadBytes }, byteRate),
		newPlot("Write rate", h, func(r status.Rate) float64 { return r.WrittenBytes }, byteRate),
	}
	render(w, c.cfg.Logger, "chunkserver.html", p)
}
