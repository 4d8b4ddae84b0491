package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// The observer-reads benchmark (`chunkfs bench observers`): the experiment
// of HDFS-12943 (Erik Krogen's comment of 2017-12-19). A metadata workload
// mixing reads and writes (Mix) runs against a group of masters with 0 %,
// 20 %, 50 % and 100 % of its reads sent to the group's observers, then its
// writes alone at 2x and 4x their rate. Each master is its own host: its
// own network namespace and a cgroup capping it to a share of a CPU, so
// that reads moved to observers free capacity on the leader. The load
// generator runs uncapped in a namespace of its own; its CPU use is
// reported to show it was not the bottleneck. Every column gets a fresh
// group of masters, so the leader's RPC queue times (measured at the
// master: arrival of a call's headers to its handler) are the column's.

// ObserversConfig describes an observer-reads run.
type ObserversConfig struct {
	// Prefix starts every namespace and cgroup name, so that leftovers of
	// a killed run are found and removed; at most 8 bytes.
	Prefix    string
	Voters    int     // the group's voters (3 or 5)
	Observers int     // its observers
	MasterCPU float64 // each master's CPU cap, in CPUs
	// Clients is how many clients the load generator runs; a column's
	// share of reads on observers is the share of clients that read from
	// observers (the rest set client.Config.LeaderReads), so each share
	// must be a whole number of clients.
	Clients int
	// Rate is the mixed workload's operations per second, all clients
	// together; the write-only columns run Mix's writes at WriteScales
	// times the mixed workload's write rate.
	Rate        float64
	Duration    time.Duration // each column's run
	Mix         Mix
	Shares      []float64 // shares of reads sent to observers
	WriteScales []float64
	Seed        uint64
	MaxInFlight int
	// InitialNames is the names each client creates before a column;
	// ReadSetFiles the files getchunks reads the chunks of.
	InitialNames int
	ReadSetFiles int
	Binary       string   // the chunkfs executable
	WorkerArgv   []string // runs WorkerMain
	WorkDir      string   // "" means os.TempDir()
}

// DefaultObserversPrefix starts the observer benchmark's names.
const DefaultObserversPrefix = "obs-"

// DefaultObserversConfig is the experiment's default: three voters and two
// observers at a quarter of a CPU each, 10 clients, the default mix at
// 1000 operations a second, 20 s a column (about four minutes in all).
func DefaultObserversConfig() ObserversConfig {
	return ObserversConfig{
		Prefix: DefaultObserversPrefix, Voters: 3, Observers: 2, MasterCPU: 0.25,
		Clients: 10, Rate: 1000, Duration: 20 * time.Second, Mix: DefaultMix(),
		Shares: []float64{0, 0.2, 0.5, 1}, WriteScales: []float64{2, 4},
		Seed: 1, MaxInFlight: 2000, InitialNames: 20, ReadSetFiles: 16,
	}
}

// QuickObserversConfig is a smoke run for tests: 3 s a column at a low
// rate, the same columns.
func QuickObserversConfig() ObserversConfig {
	c := DefaultObserversConfig()
	c.Rate, c.Duration, c.InitialNames, c.ReadSetFiles = 200, 3*time.Second, 5, 4
	return c
}

// Validate reports the first invalid field.
func (c ObserversConfig) Validate() error {
	if err := (TestbedConfig{Prefix: c.Prefix}).validPrefix(); err != nil {
		return err
	}
	switch {
	case c.Voters < 3 || c.Voters > 7 || c.Observers < 1 || c.Observers > 8:
		return fmt.Errorf("observers bench: %d voters (3-7) and %d observers (1-8)", c.Voters, c.Observers)
	case c.MasterCPU < 0.01 || c.MasterCPU > float64(runtime.NumCPU()):
		return fmt.Errorf("observers bench: master CPU cap %g out of range", c.MasterCPU)
	case c.Clients < 1 || c.Clients > 1000 || c.Rate <= 0 || c.Duration <= 0 || c.MaxInFlight < 1:
		return errors.New("observers bench: clients, rate, duration and in-flight bound must be positive")
	case c.Binary == "" || len(c.WorkerArgv) == 0:
		return errors.New("observers bench: no chunkfs binary or no worker command")
	}
	for _, s := range c.Shares {
		if k := s * float64(c.Clients); s < 0 || s > 1 || math.Abs(k-math.Round(k)) > 1e-9 {
			return fmt.Errorf("observers bench: share %g of reads is not a whole number of %d clients", s, c.Clients)
		}
	}
	for _, s := range c.WriteScales {
		if s <= 0 || s > 100 {
			return fmt.Errorf("observers bench: write scale %g out of range", s)
		}
	}
	return c.Mix.Validate()
}

// validPrefix checks a testbed prefix alone.
func (c TestbedConfig) validPrefix() error {
	if c.Prefix == "" || len(c.Prefix) > 8 || strings.ContainsAny(c.Prefix, "/ \t") {
		return fmt.Errorf("prefix %q must be 1-8 bytes without spaces or slashes", c.Prefix)
	}
	return nil
}

// Column is one column of the table: a workload and where its reads go.
type Column struct {
	Name      string  `json:"name"`
	Share     float64 `json:"share"`      // of reads sent to observers
	WriteOnly bool    `json:"write_only"` // the mix's writes alone
	Rate      float64 `json:"rate"`       // operations a second offered
	Mix       Mix     `json:"mix"`
}

// Columns returns the columns of the run, in order.
func (c ObserversConfig) Columns() []Column {
	var out []Column
	for _, s := range c.Shares {
		out = append(out, Column{Name: fmt.Sprintf("%g %%", 100*s), Share: s, Rate: c.Rate, Mix: c.Mix})
	}
	writeRate := c.Rate * (1 - c.Mix.ReadShare())
	for _, k := range c.WriteScales {
		rate := math.Round(k*writeRate*1e6) / 1e6 // 1000 × 0.1 × 4 is 400, not 399.99…
		out = append(out, Column{Name: fmt.Sprintf("writes %gx", k), Share: 1, WriteOnly: true, Rate: rate, Mix: c.Mix.Writes()})
	}
	return out
}

// ColumnResult is a column as measured.
type ColumnResult struct {
	Column Column     `json:"column"`
	Load   MetaResult `json:"load"`
	// Leader is the leader's queue times and CPU use; Observers the
	// calls each observer served.
	Leader    MasterUse   `json:"leader"`
	Observers []MasterUse `json:"observers"`
	Err       string      `json:"error,omitempty"`
}

// MasterUse is one master's part in a column.
type MasterUse struct {
	ID    string     `json:"id"`
	Queue QueueTimes `json:"queue"`
	// CPU is the CPUs it used during the run (CPU seconds over the run's
	// seconds); Throttled the share of the cgroup's periods in which its
	// cap held it back.
	CPU       float64 `json:"cpu"`
	Throttled float64 `json:"throttled"`
	// IdleCPU is the CPUs it used in the idleWindow before the run,
	// set up but unloaded: its floor of Raft and chunkserver heartbeats.
	IdleCPU float64 `json:"idle_cpu"`
}

// QueueTimes is a master's RPC queue-time summary, as it writes it
// (master.QueueStats).
type QueueTimes struct {
	Calls  int64   `json:"calls"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
}

// ObserversReport is the outcome of a run.
type ObserversReport struct {
	Started time.Time       `json:"started"`
	Config  ObserversConfig `json:"config"`
	CPUs    int             `json:"cpus"`
	LoadAvg string          `json:"loadavg"` // the machine's /proc/loadavg at the start
	Columns []ColumnResult  `json:"columns"`
}

// RunObservers builds the hosts, runs every column on a fresh group of
// masters and removes everything again, also when ctx is cancelled. A
// column that fails is recorded with its error and the run goes on.
func RunObservers(ctx context.Context, cfg ObserversConfig, log *slog.Logger) (*ObserversReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	unlock, err := Lock(ctx, LockPath(cfg.Prefix))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := Cleanup(ctx, cfg.Prefix, log); err != nil {
		return nil, fmt.Errorf("removing a leftover testbed: %w", err)
	}
	if err := removeCgroups(cfg.Prefix); err != nil {
		return nil, fmt.Errorf("removing leftover cgroups: %w", err)
	}
	dir, err := os.MkdirTemp(cfg.WorkDir, "chunkfs-obs-")
	if err != nil {
		return nil, err
	}
	rep, err := runObserversIn(ctx, cfg, dir, log)
	err = errors.Join(err, removeCgroups(cfg.Prefix))
	if err == nil && !rep.failed() {
		os.RemoveAll(dir)
	} else {
		log.Warn("keeping the run's logs and data", "dir", dir)
	}
	return rep, err
}

func (r *ObserversReport) failed() bool {
	for _, c := range r.Columns {
		if c.Err != "" {
			return true
		}
	}
	return false
}

func runObserversIn(ctx context.Context, cfg ObserversConfig, dir string, log *slog.Logger) (rep *ObserversReport, err error) {
	load, _ := os.ReadFile("/proc/loadavg")
	rep = &ObserversReport{Started: time.Now().UTC(), Config: cfg, CPUs: runtime.NumCPU(), LoadAvg: strings.TrimSpace(string(load))}
	net, err := buildObsNet(ctx, cfg.Prefix, cfg.Voters+cfg.Observers, log)
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, net.close()) }()
	for i, col := range cfg.Columns() {
		log.Info("running", "column", col.Name, "rate", col.Rate)
		cr, err := runColumn(ctx, cfg, net, col, filepath.Join(dir, fmt.Sprintf("col%d", i+1)), log)
		if err != nil {
			cr.Err = err.Error()
			log.Error("column failed", "column", col.Name, "err", err)
		} else {
			log.Info("measured", "column", col.Name, "ops/s", fmt.Sprintf("%.0f", cr.Load.OpsPerSec),
				"write ms", fmt.Sprintf("%.2f", cr.Load.Writes.MeanMS), "read ms", fmt.Sprintf("%.2f", cr.Load.Reads.MeanMS),
				"leader queue ms", fmt.Sprintf("%.2f", cr.Leader.Queue.MeanMS), "leader cpu", fmt.Sprintf("%.2f", cr.Leader.CPU))
		}
		rep.Columns = append(rep.Columns, cr)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, nil
}

// obsGroup is a column's running servers.
type obsGroup struct {
	ids     []string
	addrs   []string
	masters []*proc
	caps    []*cpuCap
	chunk   *proc
	logs    []*os.File
	stats   []string // each master's queue-stats file
}

// idleWindow is how long a column's masters are watched idle, set up,
// before the run.
const idleWindow = 2 * time.Second

// masterPortObs is the port every master listens on in its namespace.
const masterPortObs = "7000"

// startObsGroup starts the masters, each in its namespace and cgroup, and the
// chunkserver, all on plain TCP (--insecure): the experiment measures the
// metadata path, not TLS.
func startObsGroup(cfg ObserversConfig, net *obsNet, dir string) (*obsGroup, error) {
	g := &obsGroup{}
	var voters []string
	for i, h := range net.Masters {
		id := fmt.Sprintf("m%d", i+1)
		g.ids = append(g.ids, id)
		g.addrs = append(g.addrs, netJoin(h, masterPortObs))
		if i < cfg.Voters {
			voters = append(voters, id+"="+g.addrs[i])
		}
	}
	for i, h := range net.Masters {
		stats := filepath.Join(dir, g.ids[i]+"-queue.json")
		g.stats = append(g.stats, stats)
		argv := []string{cfg.Binary, "master", "--id", g.ids[i], "--dir", filepath.Join(dir, g.ids[i]),
			"--listen", g.addrs[i], "--cluster", strings.Join(voters, ","), "--replication", "1",
			"--min-replicas", "1", "--queue-stats", stats, "--insecure"}
		if i >= cfg.Voters {
			argv = append(argv, "--observer")
		}
		cap, err := newCPUCap(filepath.Join(cfg.Prefix+"bench", g.ids[i]), cfg.MasterCPU, masterShares)
		if err != nil {
			return g, err
		}
		g.caps = append(g.caps, cap)
		p, err := g.start(g.ids[i], h.NS, argv, dir)
		if err != nil {
			return g, err
		}
		g.masters = append(g.masters, p)
		if err := cap.add(p.cmd.Process.Pid); err != nil {
			return g, err
		}
	}
	argv := []string{cfg.Binary, "chunkserver", "--dir", filepath.Join(dir, "cs"), "--listen", netJoin(net.Chunk, "7001"),
		"--master", strings.Join(g.addrs, ","), "--heartbeat", metaHeartbeat.String(), "--insecure"}
	p, err := g.start("chunkserver", net.Chunk.NS, argv, dir)
	g.chunk = p
	return g, err
}

func netJoin(h Host, port string) string { return net.JoinHostPort(h.Addr.String(), port) }

func (g *obsGroup) start(name, ns string, argv []string, dir string) (*proc, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	g.logs = append(g.logs, log)
	return startIn(name, ns, argv, log, nil, nil)
}

// sample is each master's CPU seconds and cgroup periods at one moment.
type sample struct {
	cpu                []float64
	periods, throttled []int64
}

func (g *obsGroup) sample() sample {
	var s sample
	for i, p := range g.masters {
		s.cpu = append(s.cpu, procCPU(p.cmd.Process.Pid))
		per, thr, _ := g.caps[i].throttled()
		s.periods, s.throttled = append(s.periods, per), append(s.throttled, thr)
	}
	return s
}

// stop stops the servers (the masters write their queue stats as they
// close) and removes the cgroups.
func (g *obsGroup) stop() error {
	if g.chunk != nil {
		g.chunk.stop(5 * time.Second)
	}
	for _, p := range g.masters {
		p.cmd.Process.Signal(syscall.SIGTERM) // all at once: they close in parallel
	}
	deadline := time.After(20 * time.Second)
	for _, p := range g.masters {
		// A second SIGTERM (p.stop) would end a master whose signal
		// handler is done before it writes its queue stats: wait, then
		// kill.
		select {
		case <-p.done:
		case <-deadline:
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	var errs []error
	for _, c := range g.caps {
		errs = append(errs, c.remove())
	}
	for _, l := range g.logs {
		l.Close()
	}
	g.caps, g.logs = nil, nil
	return errors.Join(errs...)
}

// runColumn runs one column on a fresh group in dir.
func runColumn(ctx context.Context, cfg ObserversConfig, net *obsNet, col Column, dir string, log *slog.Logger) (cr ColumnResult, err error) {
	cr.Column = col
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cr, err
	}
	g, err := startObsGroup(cfg, net, dir)
	defer func() { err = errors.Join(err, g.stop()) }()
	if err != nil {
		return cr, err
	}
	task := Task{Op: OpMeta, Master: strings.Join(g.addrs, ","), Timeout: 10*cfg.Duration + 5*time.Minute,
		Meta: &MetaLoad{Clients: cfg.Clients, ObserverClients: int(math.Round(col.Share * float64(cfg.Clients))),
			Observers: cfg.Observers, Rate: col.Rate, Duration: cfg.Duration, Mix: col.Mix, Seed: cfg.Seed,
			MaxInFlight: cfg.MaxInFlight, InitialNames: cfg.InitialNames, ReadSetFiles: cfg.ReadSetFiles}}
	w, err := startWorker(Config{WorkerArgv: cfg.WorkerArgv}, net.Generator, task, dir, "generator")
	if err != nil {
		return cr, err
	}
	defer w.kill()
	gen, err := newCPUCap(filepath.Join(cfg.Prefix+"bench", "lg"), 0, generatorShares)
	if err != nil {
		return cr, err
	}
	defer func() {
		w.kill() // out of the group before it is removed
		err = errors.Join(err, gen.remove())
	}()
	if err := gen.add(w.p.cmd.Process.Pid); err != nil {
		return cr, err
	}
	stop := context.AfterFunc(ctx, func() { w.in.Close(); w.p.cmd.Process.Kill() })
	defer stop()
	if m, err := w.next(); err != nil || !m.Ready {
		return cr, errors.Join(errors.New("generator not ready"), err)
	}
	idle, i0 := g.sample(), time.Now()
	if err := sleepCtx(ctx, idleWindow); err != nil {
		return cr, err
	}
	before, t0 := g.sample(), time.Now()
	idleSecs := t0.Sub(i0).Seconds()
	if _, err := io.WriteString(w.in, "go\n"); err != nil {
		return cr, err
	}
	m, err := w.next()
	if err != nil || m.Result == nil || m.Result.Meta == nil {
		return cr, errors.Join(errors.New("generator gave no result"), err)
	}
	after, secs := g.sample(), time.Since(t0).Seconds()
	cr.Load = *m.Result.Meta
	if err := g.stop(); err != nil {
		return cr, err
	}
	for i, id := range g.ids {
		u := MasterUse{ID: id, CPU: (after.cpu[i] - before.cpu[i]) / secs, IdleCPU: (before.cpu[i] - idle.cpu[i]) / idleSecs}
		if dp := after.periods[i] - before.periods[i]; dp > 0 {
			u.Throttled = float64(after.throttled[i]-before.throttled[i]) / float64(dp)
		}
		u.Queue, err = readQueueTimes(g.stats[i])
		if err != nil {
			return cr, err
		}
		switch {
		case g.addrs[i] == cr.Load.Leader:
			cr.Leader = u
		case i >= cfg.Voters:
			cr.Observers = append(cr.Observers, u)
		}
	}
	if cr.Leader.ID == "" {
		return cr, fmt.Errorf("generator reported leader %q, not one of %v", cr.Load.Leader, g.addrs)
	}
	return cr, nil
}

func readQueueTimes(file string) (QueueTimes, error) {
	var q QueueTimes
	b, err := os.ReadFile(file)
	if err != nil {
		return q, fmt.Errorf("master queue stats: %w", err)
	}
	return q, json.Unmarshal(b, &q)
}
