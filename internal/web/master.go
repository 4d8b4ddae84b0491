package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/metrics"
	"github.com/chunkfs/chunkfs/internal/status"
)

// MasterSource is how the master's page reads the cluster: the client
// calls `chunkfs admin report` makes. *client.Client is one.
type MasterSource interface {
	ClusterReport(ctx context.Context) (*client.Report, error)
	HAStatus(ctx context.Context) (*client.HAStatus, error)
	HAStatusOf(ctx context.Context, addr string) (*client.HAStatus, error)
	Stat(ctx context.Context, path string) (*chunkfs.FileInfo, error)
	ReadDir(ctx context.Context, path string) ([]fs.DirEntry, error)
	Chunks(ctx context.Context, path string) ([]client.ChunkInfo, error)
}

// MasterConfig configures a master's HTTP server.
type MasterConfig struct {
	Source   MasterSource
	Figures  func() master.Figures                 // the serving master's own figures
	Problems func(limit int) []master.ChunkProblem // its repair queue
	// Traffic, when set, returns the chunk bytes read from and written to
	// the cluster's chunkservers since they started (in-process clusters
	// sum their chunkservers' figures). Nil: the master does not know, and
	// Table 3 shows operations only.
	Traffic func() (read, written int64)
	Calls   *Calls            // the master's calls, counted (its OnCall); nil: none counted
	Recent  *Recent           // the master's last warnings and errors; nil: none shown
	Metrics *metrics.Registry // served at /metrics; nil: none
	Pprof   bool              // serve /debug/pprof
	Timeout time.Duration     // bound on the cluster calls of one page
	Clock   clock.Clock
	Logger  *slog.Logger
}

// DefaultMasterConfig returns defaults; Source, Figures and Problems must
// still be set.
func DefaultMasterConfig() MasterConfig {
	return MasterConfig{Timeout: 5 * time.Second, Clock: clock.Real{}, Logger: slog.Default()}
}

// Validate reports the first unusable setting.
func (c *MasterConfig) Validate() error {
	switch {
	case c.Source == nil || c.Figures == nil || c.Problems == nil:
		return errors.New("web: master page needs Source, Figures and Problems")
	case c.Timeout <= 0 || c.Clock == nil || c.Logger == nil:
		return errors.New("web: Timeout, Clock and Logger must be set")
	}
	return nil
}

// Master is a master's HTTP server: its status page, file browser,
// tables as JSON, /metrics and /debug/pprof.
type Master struct {
	cfg MasterConfig
	mux *http.ServeMux

	mu    sync.Mutex // guards rates
	rates status.Rates
}

// NewMaster returns a master's HTTP server. Its figures register with
// cfg.Metrics.
func NewMaster(cfg MasterConfig) (*Master, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Master{cfg: cfg, mux: http.NewServeMux()}
	common(m.mux, cfg.Metrics, cfg.Pprof)
	m.mux.HandleFunc("GET /{$}", m.overview)
	m.mux.HandleFunc("GET /browse", m.browse)
	m.mux.HandleFunc("GET /api/tables", m.tablesJSON)
	if cfg.Metrics != nil {
		cfg.Metrics.Figures(func() []metrics.Figure { return masterFigures(cfg.Figures()) })
	}
	m.Sample()
	return m, nil
}

// ServeHTTP serves the pages.
func (m *Master) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.mux.ServeHTTP(w, r) }

// Sample records the totals Table 3 is computed from; Run calls it every
// status.Step.
func (m *Master) Sample() {
	t := status.Totals{Ops: m.cfg.Calls.Ops()}
	if m.cfg.Traffic != nil {
		t.ReadBytes, t.WrittenBytes = m.cfg.Traffic()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rates.Record(m.cfg.Clock.Now(), t)
}

// Run samples the totals every status.Step until ctx ends.
func (m *Master) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(status.Step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.Sample()
		}
	}
}

// Tables is Table 2 and Table 3 as /api/tables answers them and `chunkfs
// admin report --http` reads them.
type Tables struct {
	Table2 status.Table2 `json:"table2"`
	Table3 status.Table3 `json:"table3"`
}

// tables computes both tables from a report and the master's figures.
func (m *Master) tables(r *client.Report, f master.Figures) Tables {
	m.Sample()
	m.mu.Lock()
	t3 := status.NewTable3(&m.rates, m.cfg.Traffic != nil)
	m.mu.Unlock()
	return Tables{Table2: status.NewTable2(ClusterOf(r, f.MetadataBytes)), Table3: t3}
}

// ClusterOf is the input of Table 2 from a cluster report; masterHeap is
// the master's namespace heap, or -1 when not known.
func ClusterOf(r *client.Report, masterHeap int64) status.Cluster {
	c := status.Cluster{Files: r.Files, DeadFiles: r.DeadFiles, Chunks: r.Chunks + r.DeadChunks, MasterMetadata: masterHeap}
	c.Capacity, c.Used, _ = r.Space()
	for _, s := range r.Servers {
		c.Servers = append(c.Servers, status.Server{Alive: s.Alive, Chunks: s.Chunks, Used: s.Used})
	}
	return c
}

func (m *Master) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), m.cfg.Timeout)
}

func (m *Master) tablesJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := m.ctx(r)
	defer cancel()
	rep, err := m.cfg.Source.ClusterReport(ctx)
	if err != nil {
		problem(w, http.StatusBadGateway, "cluster report: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(m.tables(rep, m.cfg.Figures()))
}

// maxProblems is the longest repair queue the page lists.
const maxProblems = 200

// overviewPage is what the overview template shows.
type overviewPage struct {
	Title    string
	Now      time.Time
	Table2   []status.Row
	T3Header []string
	T3Rows   [][]string
	Plots    []Plot
	Report   *client.Report
	Figures  master.Figures
	Problems []master.ChunkProblem
	More     bool // the queue is longer than the page lists
	Masters  []masterRow
	Recent   []LogEntry
}

// masterRow is one master of the group as the page lists it.
type masterRow struct {
	ID, Addr, Role string
	Voter          bool
	Applied        uint64
	Lag            string // log entries behind the leader
	Err            string
}

func (m *Master) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := m.ctx(r)
	defer cancel()
	rep, err := m.cfg.Source.ClusterReport(ctx)
	if err != nil {
		problem(w, http.StatusBadGateway, "cluster report: %v", err)
		return
	}
	f := m.cfg.Figures()
	t := m.tables(rep, f)
	p := overviewPage{Title: "chunkfs master", Now: m.cfg.Clock.Now(), Table2: t.Table2.Rows(), Report: rep, Figures: f}
	p.T3Header, p.T3Rows = t.Table3.Rows()
	p.Problems = m.cfg.Problems(maxProblems + 1)
	if len(p.Problems) > maxProblems {
		p.Problems, p.More = p.Problems[:maxProblems], true
	}
	m.mu.Lock()
	h := m.rates.History()
	m.mu.Unlock()
	p.Plots = []Plot{newPlot("Master operations", h, func(r status.Rate) float64 { return r.Ops }, opRate)}
	if m.cfg.Traffic != nil {
		p.Plots = append(p.Plots,
			newPlot("Read rate", h, func(r status.Rate) float64 { return r.ReadBytes }, byteRate),
			newPlot("Write rate", h, func(r status.Rate) float64 { return r.WrittenBytes }, byteRate))
	}
	p.Masters = m.masters(ctx)
	p.Recent = m.cfg.Recent.Entries()
	render(w, m.cfg.Logger, "master.html", p)
}

// masters asks every master of the group how it sees the log.
func (m *Master) masters(ctx context.Context) []masterRow {
	self, err := m.cfg.Source.HAStatus(ctx)
	if err != nil {
		return []masterRow{{Err: err.Error()}}
	}
	if len(self.Members) <= 1 {
		return []masterRow{{ID: self.ID, Addr: self.Addr, Role: self.Role, Voter: true, Applied: self.Applied, Lag: "0"}}
	}
	var rows []masterRow
	var leader uint64
	for _, mb := range self.Members {
		row := masterRow{ID: mb.ID, Addr: mb.Addr, Voter: mb.Voter}
		if st, err := m.memberStatus(ctx, mb.Addr); err != nil {
			row.Err = err.Error()
		} else {
			row.Role, row.Applied = st.Role, st.Applied
			if st.Role == "leader" {
				leader = st.Applied
			}
		}
		rows = append(rows, row)
	}
	for i := range rows {
		if rows[i].Err == "" && leader > 0 {
			rows[i].Lag = formatLag(leader, rows[i].Applied)
		}
	}
	return rows
}

// memberTimeout bounds the call to one master of the group, so that a
// dead one does not hold the page up.
const memberTimeout = time.Second

func (m *Master) memberStatus(ctx context.Context, addr string) (*client.HAStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, memberTimeout)
	defer cancel()
	return m.cfg.Source.HAStatusOf(ctx, addr)
}

func formatLag(leader, applied uint64) string {
	if applied >= leader {
		return "0"
	}
	return fmt.Sprint(leader - applied)
}
