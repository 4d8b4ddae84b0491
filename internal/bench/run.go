package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Point is one measurement: N clients running one workload.
type Point struct {
	Workload Workload `json:"workload"`
	Clients  int      `json:"clients"`
	Bytes    int64    `json:"bytes"`   // payload moved by all clients
	Seconds  float64  `json:"seconds"` // first client's start to last client's end
	// Aggregate is Bytes / Seconds in MB/s; PerClient is Aggregate / N;
	// Slowest is the lowest rate any one client saw over its own run.
	Aggregate  float64 `json:"aggregate_mbps"`
	PerClient  float64 `json:"per_client_mbps"`
	Slowest    float64 `json:"slowest_client_mbps"`
	Limit      float64 `json:"limit_mbps"`
	Efficiency float64 `json:"efficiency"` // Aggregate / Limit
	// ChunkSize is the chunk size of the cluster the point ran on;
	// Variant marks a labelled variant of its panel, not the headline.
	ChunkSize int64 `json:"chunk_size"`
	Variant   bool  `json:"variant,omitempty"`
	// LimitRule is the rule Limit follows (limits.go).
	LimitRule string `json:"limit_rule"`
	// Placement is where the replicas of the files the point wrote are.
	Placement *Placement `json:"placement,omitempty"`
	// ClientRuns is each client's own run: when it started and ended
	// (seconds from the point's start) and how long each operation took.
	ClientRuns []ClientRun `json:"client_runs,omitempty"`
	Err        string      `json:"error,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Started  time.Time  `json:"started"`
	Scale    float64    `json:"scale"`
	NICMbit  float64    `json:"nic_mbit"`
	LinkMbit float64    `json:"link_mbit"`
	Servers  int        `json:"chunkservers"`
	Replicas int        `json:"replicas"`
	TLS      bool       `json:"tls,omitempty"`     // the cluster ran mutual TLS
	Network  []NetPoint `json:"network,omitempty"` // raw TCP across the testbed
	Probe    *Probe     `json:"probe,omitempty"`
	ReadSet  *Placement `json:"read_set,omitempty"` // where the read set's replicas are
	Points   []Point    `json:"points"`
}

// Failed returns the points that did not complete.
func (r *Report) Failed() []Point {
	var out []Point
	for _, p := range r.Points {
		if p.Err != "" {
			out = append(out, p)
		}
	}
	return out
}

// Run builds the testbed, starts the cluster, runs every point and tears it
// all down again, also when ctx is cancelled. A point that fails is recorded
// with its error and the run goes on; the returned error is for failures of
// the testbed or the cluster.
func Run(ctx context.Context, cfg Config, log *slog.Logger) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, release, err := claim(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer release()
	rep, err := runIn(ctx, cfg, dir, log)
	if err == nil && len(rep.Failed()) == 0 {
		os.RemoveAll(dir)
	} else {
		log.Warn("keeping the run's logs and data", "dir", dir)
	}
	return rep, err
}

// workDirPrefix starts the name of a run's work directory, so that
// leftovers are found; workDirPattern adds the testbed's prefix.
const workDirPrefix = "chunkfs-bench-"

// claim takes the testbed for a run of cfg: it checks the privileges,
// holds the testbed's lock, removes what runs killed before they could
// clean up left, and makes the run's work directory. release ends the
// claim; the directory stays.
func claim(ctx context.Context, cfg Config, log *slog.Logger) (dir string, release func(), err error) {
	if err := CheckPrivileges(); err != nil {
		return "", nil, err
	}
	unlock, err := Lock(ctx, LockPath(cfg.Testbed.Prefix))
	if err != nil {
		return "", nil, err
	}
	if err := removeLeftovers(ctx, cfg, log); err != nil {
		unlock()
		return "", nil, err
	}
	if dir, err = os.MkdirTemp(cfg.WorkDir, workDirPattern(cfg.Testbed.Prefix)); err != nil {
		unlock()
		return "", nil, err
	}
	return dir, unlock, nil
}

// workDirPattern is what MkdirTemp names a run's work directory after: a
// run removes as leftovers only the directories of runs on a testbed with
// its prefix, whose lock it holds, never those of another benchmark
// running beside it (bench gfs and bench recovery use different prefixes).
func workDirPattern(testbedPrefix string) string {
	return workDirPrefix + testbedPrefix
}

// removeLeftovers removes the namespaces and work directories of runs that
// were killed before they could clean up.
func removeLeftovers(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := Cleanup(ctx, cfg.Testbed.Prefix, log); err != nil {
		return fmt.Errorf("removing a leftover testbed: %w", err)
	}
	removeLeftoverDirs(cfg.WorkDir, cfg.Testbed.Prefix, log)
	return nil
}

// removeLeftoverDirs removes from root (the system's temporary directory
// when empty) the work directories of earlier runs on the testbed with
// prefix testbedPrefix.
func removeLeftoverDirs(root, testbedPrefix string, log *slog.Logger) {
	if root == "" {
		root = os.TempDir()
	}
	old, _ := filepath.Glob(filepath.Join(root, workDirPattern(testbedPrefix)+"*"))
	for _, d := range old {
		log.Info("removing a leftover work directory", "dir", d)
		os.RemoveAll(d)
	}
}

func runIn(ctx context.Context, cfg Config, dir string, log *slog.Logger) (rep *Report, err error) {
	tb, err := NewTestbed(cfg.Testbed, log)
	if err != nil {
		return nil, err
	}
	log.Info("building the testbed", "chunkservers", cfg.Testbed.Chunkservers, "clients", cfg.Testbed.Clients, "nic", cfg.Testbed.NIC, "link", cfg.Testbed.Link)
	if err := tb.Build(ctx); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tb.Close()) }()
	if cfg.NetworkOnly {
		cfg.Calibrate, cfg.Probe, cfg.Workloads = true, false, nil
	}
	s := &session{cfg: cfg, tb: tb, dir: dir, log: log}
	defer func() { err = errors.Join(err, s.stopCluster()) }()
	return s.run(ctx)
}

// session is one run on a built testbed.
type session struct {
	cfg Config
	tb  *Testbed
	dir string
	log *slog.Logger

	cl       *cluster // the running cluster; nil before the first and for a network-only run
	clusters int      // how many have been started

	readSetPlacement *Placement
}

func (s *session) run(ctx context.Context) (*Report, error) {
	net := s.cfg.Network()
	rep := &Report{Started: time.Now().UTC(), Scale: s.cfg.Scale, NICMbit: float64(net.NIC / Mbit),
		LinkMbit: float64(net.Link / Mbit), Servers: net.Chunkservers, Replicas: net.Replicas, TLS: s.cfg.TLS}
	if s.cfg.Calibrate {
		np, err := s.calibrate(ctx)
		if err != nil {
			return rep, err
		}
		rep.Network = np
	}
	if s.cfg.Probe {
		if err := s.useCluster(ctx, s.cfg.chunkSize(Reads)); err != nil {
			return rep, err
		}
		p, err := s.probe(ctx)
		if err != nil {
			return rep, err
		}
		rep.Probe = p
	}
	for _, pn := range s.cfg.panels() {
		if err := s.useCluster(ctx, pn.ChunkSize); err != nil {
			return rep, err
		}
		if pn.Workload == Reads {
			if err := s.prepareReadSet(ctx); err != nil {
				return rep, err
			}
			rep.ReadSet = s.readSetPlacement
		}
		for _, n := range s.cfg.Clients {
			p := s.point(ctx, pn, n)
			rep.Points = append(rep.Points, p)
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			if err := s.cl.failed(); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// useCluster makes sure the running cluster has chunks of chunkSize bytes:
// it keeps the one running if it has, else
// stops it and starts a fresh one, with empty disks, in its own directory.
func (s *session) useCluster(ctx context.Context, chunkSize int64) error {
	if s.cl != nil && s.cl.chunkSize == chunkSize {
		return nil
	}
	if err := s.stopCluster(); err != nil {
		return err
	}
	s.clusters++
	dir := filepath.Join(s.dir, fmt.Sprintf("cluster%d", s.clusters))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	s.log.Info("starting a cluster", "chunk size", chunkSize, "dir", dir)
	cl, err := startCluster(s.tb, s.cfg, dir, chunkSize)
	if err != nil {
		return err
	}
	s.cl = cl
	if err := s.waitCluster(ctx); err != nil {
		return err
	}
	return s.warmup(ctx)
}

// warmupWrites is how many writes of WriteSize the warm-up makes: as
// many as a point's writer has in flight under the client's default
// write-behind (16 MiB), so that it opens as many data connections.
const warmupWrites = 8

// warmup writes one file to the fresh cluster from the first client
// host, unmeasured (Config.Warmup).
func (s *session) warmup(ctx context.Context) error {
	if !s.cfg.Warmup {
		return nil
	}
	task := Task{Op: OpWrite, Master: s.cl.master, TLSDir: s.cl.tlsDir, Path: fmt.Sprintf("/bench/warmup/cluster%d", s.clusters),
		IOSize: s.cfg.WriteSize, Bytes: warmupWrites * s.cfg.WriteSize, Timeout: 5 * time.Minute}
	if _, err := runWorkers(ctx, s.cfg, s.tb.Clients[:1], []Task{task}, s.dir, "warmup"); err != nil {
		return errors.Join(fmt.Errorf("warming the cluster up: %w", err), s.cl.failed())
	}
	return nil
}

// stopCluster stops the running cluster, if any.
func (s *session) stopCluster() error {
	if s.cl == nil {
		return nil
	}
	err := s.cl.stop()
	s.cl = nil
	return err
}

// waitCluster waits until the master sees every chunkserver.
func (s *session) waitCluster(ctx context.Context) error {
	s.log.Info("waiting for the cluster", "master", s.cl.master)
	task := Task{Op: OpWait, Master: s.cl.master, TLSDir: s.cl.tlsDir, Servers: len(s.tb.Chunkservers), Timeout: time.Minute}
	_, err := runWorkers(ctx, s.cfg, s.tb.Clients[:1], []Task{task}, s.dir, "wait")
	if err != nil {
		return errors.Join(fmt.Errorf("cluster did not come up: %w", err), s.cl.failed())
	}
	return nil
}

// probeRounds is how many writes and appends the probe times.
const probeRounds = 5

// probe times the steps of one client's writes and appends.
func (s *session) probe(ctx context.Context) (*Probe, error) {
	task := Task{Op: OpProbe, Master: s.cl.master, TLSDir: s.cl.tlsDir, Path: "/bench/probe/file", IOSize: s.cfg.WriteSize,
		Bytes: probeRounds * s.cfg.WriteSize, Timeout: 5 * time.Minute}
	res, err := runWorkers(ctx, s.cfg, s.tb.Clients[:1], []Task{task}, s.dir, "probe")
	if err != nil {
		return nil, err
	}
	p := &Probe{Bytes: s.cfg.WriteSize, WireMS: float64(s.cfg.WriteSize) / (s.cfg.Testbed.NIC.MBps() * 1e6) * 1000, PhasesMS: res[0].PhasesMS}
	s.log.Info("probed the data path\n" + p.String())
	return p, nil
}

// readSetDir holds the files the reads workload reads.
const readSetDir = "/bench/readset"

func (s *session) readSet() []string {
	files := make([]string, s.cfg.ReadSetFiles)
	for i := range files {
		files[i] = path.Join(readSetDir, fmt.Sprintf("f%04d", i))
	}
	return files
}

// prepareReadSet writes the read set with the network unshaped (it is not
// measured), from up to four clients at once.
func (s *session) prepareReadSet(ctx context.Context) error {
	s.log.Info("writing the read set (unshaped)", "files", s.cfg.ReadSetFiles, "bytes each", s.cfg.ReadSetFileSize)
	if err := s.tb.Shape(ctx, 10000*Mbit, 10000*Mbit); err != nil {
		return err
	}
	files := s.readSet()
	k := min(4, len(s.tb.Clients), len(files))
	tasks := make([]Task, k)
	for i := range tasks {
		tasks[i] = Task{Op: OpPrepare, Master: s.cl.master, TLSDir: s.cl.tlsDir, IOSize: s.cfg.WriteSize, Bytes: s.cfg.ReadSetFileSize}
	}
	for i, f := range files {
		tasks[i%k].Files = append(tasks[i%k].Files, f)
	}
	_, err := runWorkers(ctx, s.cfg, s.tb.Clients[:k], tasks, s.dir, "prepare")
	if serr := s.tb.Shape(ctx, s.cfg.Testbed.NIC, s.cfg.Testbed.Link); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("writing the read set: %w", err)
	}
	s.readSetPlacement = s.locate(ctx, files, false)
	return nil
}

// point measures panel pn's workload with n clients.
func (s *session) point(ctx context.Context, pn Panel, n int) Point {
	w, net := pn.Workload, s.cfg.Network()
	p := Point{Workload: w, Clients: n, Limit: net.Limit(w, n), LimitRule: net.Rule(w), ChunkSize: pn.ChunkSize, Variant: pn.Variant}
	s.log.Info("running", "workload", w, "clients", n, "limit MB/s", fmt.Sprintf("%.3f", p.Limit))
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = s.task(pn, n, i)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*s.cfg.Duration+2*time.Minute)
	defer cancel()
	res, err := runWorkers(ctx, s.cfg, s.tb.Clients[:n], tasks, s.dir, fmt.Sprintf("%s-n%02d", w, n))
	if err != nil {
		p.Err = err.Error()
		s.log.Error("point failed", "workload", w, "clients", n, "err", err)
		return p
	}
	p.measure(res)
	p.Placement = s.locate(ctx, s.filesOf(tasks), w == Appends)
	if w == Appends {
		s.appendLimit(&p, res)
	}
	s.log.Info("measured", "workload", w, "clients", n, "MB/s", fmt.Sprintf("%.3f", p.Aggregate), "efficiency", fmt.Sprintf("%.1f%%", 100*p.Efficiency))
	return p
}

// task is client i's part of the point (pn, n).
func (s *session) task(pn Panel, n, i int) Task {
	w := pn.Workload
	t := Task{Master: s.cl.master, TLSDir: s.cl.tlsDir, IOSize: s.cfg.ioSize(w), Bytes: s.cfg.perClientBytes(w, n), Timeout: 10*s.cfg.Duration + time.Minute}
	switch w {
	case Reads:
		t.Op, t.Files, t.Seed = OpRead, s.readSet(), int64(1000*n+i)
	case Writes:
		t.Op, t.Path = OpWrite, fmt.Sprintf("/bench/writes/%s/n%02d/client%02d", chunkDir(pn.ChunkSize), n, i+1)
	case Appends:
		t.Op, t.Path = OpAppend, fmt.Sprintf("/bench/appends/n%02d", n)
	}
	return t
}

// ClientRun is one client's part of a point.
type ClientRun struct {
	Start float64   `json:"start_s"` // from the first client's start
	End   float64   `json:"end_s"`
	OpsMS []float64 `json:"ops_ms,omitempty"`
	// Events: the steps inside its operations (reads: every piece of a
	// region), start times from the first client's start.
	Events []Event `json:"events,omitempty"`
}

// measure fills in the rates from the clients' results.
func (p *Point) measure(res []Result) {
	first, last := res[0].StartNS, res[0].EndNS
	p.Slowest = -1
	for _, r := range res {
		p.Bytes += r.Bytes
		first, last = min(first, r.StartNS), max(last, r.EndNS)
		if rate := float64(r.Bytes) / r.Seconds() / 1e6; p.Slowest < 0 || rate < p.Slowest {
			p.Slowest = rate
		}
	}
	p.Seconds = float64(last-first) / 1e9
	for _, r := range res {
		ev := make([]Event, len(r.Events))
		for i, e := range r.Events {
			e.StartMS -= float64(first) / 1e6
			ev[i] = e
		}
		p.ClientRuns = append(p.ClientRuns, ClientRun{Start: float64(r.StartNS-first) / 1e9, End: float64(r.EndNS-first) / 1e9, OpsMS: r.OpsMS, Events: ev})
	}
	p.Aggregate = float64(p.Bytes) / p.Seconds / 1e6
	p.PerClient = p.Aggregate / float64(p.Clients)
	p.Efficiency = p.Aggregate / p.Limit
}

// appendLimit sets an appends point's limit from the servers that received
// its records: the chunks each landed in (the workers' ChunkBytes) and
// those chunks' replicas (the point's placement). If either is unknown, the
// point keeps the one-chunk limit, its rule saying so.
func (s *session) appendLimit(p *Point, res []Result) {
	landed := map[int64]int64{}
	for _, r := range res {
		for idx, b := range r.ChunkBytes {
			landed[idx] += b
		}
	}
	err := errors.New("the file's chunks could not be located")
	var limit float64
	if p.Placement != nil {
		var received map[string]int64
		if received, err = receivedBytes(landed, p.Placement.ByChunk); err == nil {
			limit, err = s.cfg.Network().AppendLimit(p.Clients, p.Bytes, received)
		}
	}
	if err != nil {
		s.log.Warn("appends: keeping the one-chunk limit", "clients", p.Clients, "err", err)
		return
	}
	p.Limit, p.LimitRule, p.Efficiency = limit, RuleAppends, p.Aggregate/limit
}

// chunkDir names the directory of a panel's files by its chunk size, so
// that a variant's files do not meet the headline's.
func chunkDir(n int64) string { return strings.ReplaceAll(chunkLabel(n), " ", "") }
