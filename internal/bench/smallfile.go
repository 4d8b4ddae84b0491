package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// SmallConfig is a run of bench smallfile: mdtest's four phases (create
// and write, stat, read, remove) on files of Size bytes in one directory
// of Files entries, through a chunkfs mount and on a local directory in
// the same run, by each number of worker processes in Procs. The
// processes share the directory, each taking Files/P of its names, as
// mdtest's tasks do without -u.
type SmallConfig struct {
	Files int   // entries of the directory
	Size  int   // bytes of each file
	Procs []int // worker processes, one run each

	// Mount is an existing chunkfs mount to run on; "" starts a cluster
	// (a master, Chunkservers chunkservers and a mount, as processes of
	// Binary on loopback) under WorkDir.
	Mount        string
	Chunkservers int
	// MountArgs are extra flags of the mount the run starts (cache
	// options, say).
	MountArgs []string
	// Local is the directory of the reference run; "" is WorkDir, the
	// file system the cluster keeps its data on.
	Local string
	// DropCaches drops the kernel's page, dentry and inode caches (root
	// only) before the stat and read phases, so that they ask the file
	// system rather than the kernel's memory of the create phase.
	DropCaches bool
	// Pprof serves /debug/pprof from the master, the chunkservers and
	// the mount the run starts, on loopback ports the run logs.
	Pprof bool

	WorkDir    string   // "": a new temporary directory, removed after
	Binary     string   // the chunkfs binary the servers run as
	WorkerArgv []string // how to start a worker process
	Timeout    time.Duration
}

// Issue 18's targets for one process, in operations a second; four
// processes are to reach SmallScale times them.
var SmallTargets = map[SmallPhase]float64{PhaseCreate: 2000, PhaseStat: 10000, PhaseRead: 5000, PhaseRemove: 2000}

// SmallScale is what four processes are to reach, relative to one.
const SmallScale = 2.5

// DefaultSmallConfig is the default run: 1,000 files of 4 KiB, by one
// process and by four.
func DefaultSmallConfig() SmallConfig {
	return SmallConfig{Files: 1000, Size: 4096, Procs: []int{1, 4}, Chunkservers: 3, Timeout: 4 * time.Hour}
}

// Validate reports the first option out of range.
func (c SmallConfig) Validate() error {
	switch {
	case c.Files < 1 || c.Files > 10_000_000:
		return fmt.Errorf("files %d out of range [1, 10,000,000]", c.Files)
	case c.Size < 0 || c.Size > 16<<20:
		return fmt.Errorf("file size %d out of range [0, 16 MiB]", c.Size)
	case len(c.Procs) == 0:
		return errors.New("no process counts")
	case c.Mount == "" && (c.Chunkservers < 1 || c.Chunkservers > 16):
		return fmt.Errorf("chunkservers %d out of range [1, 16]", c.Chunkservers)
	case c.Mount == "" && c.Binary == "":
		return errors.New("no chunkfs binary to start the cluster with")
	case len(c.WorkerArgv) == 0:
		return errors.New("no worker command")
	case c.Timeout <= 0:
		return errors.New("timeout must be positive")
	}
	for _, p := range c.Procs {
		if p < 1 || p > 64 || p > c.Files {
			return fmt.Errorf("process count %d out of range [1, min(64, files)]", p)
		}
	}
	return nil
}

// SmallReport is what a run measured.
type SmallReport struct {
	Files, Size int
	Mount       string // the mount's options, as the run started it, or its path
	Local       string // the reference directory
	LocalFS     string // its file system type
	Rows        []SmallRow
}

// SmallRow is one phase by one number of processes, on both file systems.
type SmallRow struct {
	Phase  SmallPhase
	Procs  int
	Rate   float64 // operations a second through the mount
	Local  float64 // and on the local directory
	Target float64 // issue 18's
}

// RunSmallfile runs the benchmark: it starts the cluster and mount when
// cfg.Mount is empty, then runs every phase by every process count, on
// the mount and on the local directory.
func RunSmallfile(ctx context.Context, cfg SmallConfig, log *slog.Logger) (*SmallReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	work := cfg.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "chunkfs-smallfile-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	rep := &SmallReport{Files: cfg.Files, Size: cfg.Size, Mount: cfg.Mount, Local: cfg.Local}
	if rep.Local == "" {
		rep.Local = filepath.Join(work, "local")
	}
	if err := os.MkdirAll(rep.Local, 0o755); err != nil {
		return nil, err
	}
	rep.LocalFS = fsType(rep.Local)
	mnt := cfg.Mount
	if mnt == "" {
		lc, err := startLocalCluster(ctx, cfg, work, log)
		if err != nil {
			return nil, err
		}
		defer lc.stop(log)
		mnt, rep.Mount = lc.mountDir, lc.describe()
	}
	logs := filepath.Join(work, "workers")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	for _, p := range cfg.Procs {
		for _, where := range []struct {
			root string
			rate func(*SmallRow) *float64
		}{{mnt, func(r *SmallRow) *float64 { return &r.Rate }}, {rep.Local, func(r *SmallRow) *float64 { return &r.Local }}} {
			rates, err := runSmallSet(ctx, cfg, where.root, p, logs, log)
			if err != nil {
				return rep, err
			}
			for i, ph := range SmallPhases {
				row := rep.row(ph, p)
				*where.rate(row) = rates[i]
			}
		}
	}
	return rep, nil
}

// row returns the report's row of phase by p processes, adding it.
func (r *SmallReport) row(ph SmallPhase, p int) *SmallRow {
	for i := range r.Rows {
		if r.Rows[i].Phase == ph && r.Rows[i].Procs == p {
			return &r.Rows[i]
		}
	}
	t := SmallTargets[ph]
	if p > 1 {
		t *= SmallScale
	}
	r.Rows = append(r.Rows, SmallRow{Phase: ph, Procs: p, Target: t})
	return &r.Rows[len(r.Rows)-1]
}

// runSmallSet runs the four phases by p processes in a new directory
// under root, checks that it is empty at the end and removes it; it
// returns each phase's rate in operations a second.
func runSmallSet(ctx context.Context, cfg SmallConfig, root string, p int, logs string, log *slog.Logger) ([]float64, error) {
	dir := filepath.Join(root, fmt.Sprintf("smallfile-%d-%d", p, time.Now().UnixNano()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rates := make([]float64, 0, len(SmallPhases))
	for _, ph := range SmallPhases {
		if cfg.DropCaches && (ph == PhaseStat || ph == PhaseRead) {
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
				return nil, fmt.Errorf("drop caches: %w", err)
			}
		}
		rate, err := runSmallPhase(ctx, cfg, dir, ph, p, logs)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("the run's time (--timeout %v) ran out", cfg.Timeout)
		}
		if err != nil {
			return nil, fmt.Errorf("%s, %d processes, in %s: %w", ph, p, dir, err)
		}
		log.Info("smallfile phase", "dir", dir, "phase", ph, "procs", p, "ops_per_s", int(rate))
		rates = append(rates, rate)
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("%s: %d entries left after the remove phase (first %s)", dir, len(left), left[0].Name())
	}
	return rates, os.Remove(dir)
}

// runSmallPhase runs one phase by p worker processes, each on its share
// of the files, and returns the rate of all of them together: the
// operations over the time from the first start to the last end.
func runSmallPhase(ctx context.Context, cfg SmallConfig, dir string, ph SmallPhase, p int, logs string) (float64, error) {
	hosts := make([]Host, p) // this machine's own network
	tasks := make([]Task, p)
	for i := range tasks {
		first, next := cfg.Files*i/p, cfg.Files*(i+1)/p
		tasks[i] = Task{Op: OpSmall, Small: &SmallTask{Phase: ph, Dir: dir, First: first, Count: next - first, Size: cfg.Size}}
	}
	res, err := runWorkers(ctx, Config{WorkerArgv: cfg.WorkerArgv}, hosts, tasks, logs, fmt.Sprintf("%s-%d", ph, p))
	if err != nil {
		return 0, err
	}
	var ops, start, end int64
	for i, r := range res {
		ops += r.Ops
		if i == 0 || r.StartNS < start {
			start = r.StartNS
		}
		end = max(end, r.EndNS)
	}
	if ops != int64(cfg.Files) {
		return 0, fmt.Errorf("%d operations done, want %d", ops, cfg.Files)
	}
	return float64(ops) / (float64(max(end-start, 1)) / 1e9), nil
}

// fsType names the file system dir (or its nearest existing parent) is
// on, as /proc/self/mountinfo lists it; "" if it cannot tell.
func fsType(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			return mountFSType(d)
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}
