package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"syscall"
	"time"
)

// RunRecovery builds the testbed, starts the cluster, fills it, starts the
// readers and writers, and then kills chunkservers as RecoveryConfig says,
// watching the master until each recovery is complete. Everything is torn
// down again at the end, also when ctx is cancelled.
func RunRecovery(ctx context.Context, cfg RecoveryConfig, log *slog.Logger) (*RecoveryReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	unlock, err := Lock(ctx, LockPath(cfg.Testbed.Prefix))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := removeLeftovers(ctx, cfg.clusterConfig(), log); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.WorkDir, workDirPattern(cfg.Testbed.Prefix))
	if err != nil {
		return nil, err
	}
	rep, err := runRecoveryIn(ctx, cfg, dir, log)
	if err == nil {
		os.RemoveAll(dir)
	} else {
		log.Warn("keeping the run's logs and data", "dir", dir)
	}
	return rep, err
}

func runRecoveryIn(ctx context.Context, cfg RecoveryConfig, dir string, log *slog.Logger) (rep *RecoveryReport, err error) {
	tb, err := NewTestbed(cfg.Testbed, log)
	if err != nil {
		return nil, err
	}
	log.Info("building the testbed", "chunkservers", cfg.Testbed.Chunkservers, "clients", cfg.Testbed.Clients, "nic", cfg.Testbed.NIC)
	if err := tb.Build(ctx); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tb.Close()) }()
	s := &session{cfg: cfg.clusterConfig(), tb: tb, dir: dir, log: log}
	defer func() { err = errors.Join(err, s.stopCluster()) }()
	if err := s.useCluster(ctx, cfg.ChunkSize); err != nil {
		return nil, err
	}
	r := &recoveryRun{cfg: cfg, s: s}
	return r.run(ctx)
}

// recoveryRun is one run of bench recovery on a running cluster.
type recoveryRun struct {
	cfg    RecoveryConfig
	s      *session
	rep    *RecoveryReport
	killed []int // indexes of the chunkservers killed so far
}

// The client hosts: the watcher on the first, then the readers, then the
// writers.
func (r *recoveryRun) watchHost() Host    { return r.s.tb.Clients[0] }
func (r *recoveryRun) loadHosts() []Host  { return r.s.tb.Clients[1 : 1+r.cfg.Readers+r.cfg.Writers] }
func (r *recoveryRun) victim(i int) *proc { return r.s.cl.procs[1+i] } // procs[0] is the master
func (r *recoveryRun) victimAddr(i int) string {
	return net.JoinHostPort(r.s.tb.Chunkservers[i].Addr.String(), chunkserverPort)
}

func (r *recoveryRun) run(ctx context.Context) (*RecoveryReport, error) {
	r.rep = newRecoveryReport(r.cfg)
	if err := r.s.prepareReadSet(ctx); err != nil {
		return r.rep, err
	}
	r.rep.Fill = r.s.readSetPlacement
	filled := time.Now()
	load, err := r.startLoad(ctx)
	if err != nil {
		return r.rep, err
	}
	loadStart := time.Now()
	defer load.kill()
	// The kill waits for the fill's leases to end (RecoveryConfig.Lease).
	wait := max(r.cfg.Baseline, time.Until(filled.Add(r.cfg.Lease+2*time.Second)))
	r.s.log.Info("clients running before the failure", "readers", r.cfg.Readers, "writers", r.cfg.Writers, "for", wait.Round(time.Second))
	if err := sleepCtx(ctx, wait); err != nil {
		return r.rep, err
	}
	phases := [][]int{{0}}
	if r.cfg.Second {
		phases = append(phases, []int{1, 2})
	}
	survivors := r.cfg.Testbed.Chunkservers
	for _, victims := range phases {
		survivors -= len(victims)
		ph, err := r.phase(ctx, victims, survivors)
		if ph != nil {
			r.rep.Phases = append(r.rep.Phases, *ph)
		}
		if err != nil {
			return r.rep, err
		}
	}
	res, err := load.stop()
	if err != nil {
		return r.rep, fmt.Errorf("clients: %w", err)
	}
	r.rep.measureClients(r.cfg, loadStart, res)
	return r.rep, nil
}

// phase kills the victims once the watcher runs and watches until the
// survivors have healed every chunk.
func (r *recoveryRun) phase(ctx context.Context, victims []int, survivors int) (*RecoveryPhase, error) {
	n := len(r.rep.Phases) + 1
	dirs := []string{recoveryLoadDir}
	if r.cfg.Writers == 0 {
		dirs = nil
	}
	task := Task{Op: OpWatch, Master: r.s.cl.master, TLSDir: r.s.cl.tlsDir, Files: r.s.readSet(), Timeout: r.cfg.PhaseTimeout + time.Minute,
		Watch: &WatchSpec{Live: survivors, Replicas: r.cfg.Replicas, Dirs: dirs, Interval: r.cfg.Sample, For: r.cfg.PhaseTimeout}}
	w, err := startGroup(ctx, r.s.cfg, []Host{r.watchHost()}, []Task{task}, r.s.dir, fmt.Sprintf("watch%d", n))
	if err != nil {
		return nil, err
	}
	defer w.kill()
	if err := sleepCtx(ctx, 2*r.cfg.Sample); err != nil { // a sample or two before the kill
		return nil, err
	}
	ph := &RecoveryPhase{Survivors: survivors, Limit: r.cfg.cloneNetwork(survivors).Limit()}
	for _, v := range victims {
		ph.Killed = append(ph.Killed, r.victimAddr(v))
		r.killed = append(r.killed, v)
		r.victim(v).cmd.Process.Signal(syscall.SIGKILL)
	}
	ph.KillNS = time.Now().UnixNano()
	r.s.log.Info("killed", "chunkservers", ph.Killed, "survivors", survivors, "clone limit MB/s", fmt.Sprintf("%.3f", ph.Limit))
	res, err := w.wait()
	if err != nil {
		return nil, fmt.Errorf("watching recovery %d: %w", n, err)
	}
	ph.Samples = res[0].Recovery.Samples
	ph.measure(r.cfg)
	if !ph.Healed {
		r.s.log.Warn("not recovered in time", "phase", n, "within", r.cfg.PhaseTimeout)
		return ph, fmt.Errorf("recovery %d incomplete after %v", n, r.cfg.PhaseTimeout)
	}
	r.s.log.Info("recovered", "phase", n, "seconds", fmt.Sprintf("%.1f", ph.HealedS), "clone MB/s", fmt.Sprintf("%.3f", ph.CloneMBps))
	return ph, r.s.cl.failedExcept(r.killed)
}

// startLoad starts the readers and writers, all going at once.
func (r *recoveryRun) startLoad(ctx context.Context) (*group, error) {
	var tasks []Task
	for i := range r.cfg.Readers {
		tasks = append(tasks, Task{Op: OpReadLoad, Master: r.s.cl.master, TLSDir: r.s.cl.tlsDir, Files: r.s.readSet(), IOSize: r.cfg.IOSize, Seed: int64(i + 1)})
	}
	for i := range r.cfg.Writers {
		tasks = append(tasks, Task{Op: OpWriteLoad, Master: r.s.cl.master, TLSDir: r.s.cl.tlsDir, Path: path.Join(recoveryLoadDir, fmt.Sprintf("w%02d", i+1)),
			IOSize: r.cfg.IOSize, Bytes: r.cfg.FileBytes, Seed: int64(100 + i)})
	}
	return startGroup(ctx, r.s.cfg, r.loadHosts(), tasks, r.s.dir, "load")
}

// failedExcept is failed, but for the chunkservers the run killed.
func (c *cluster) failedExcept(killed []int) error {
	for i, p := range c.procs {
		if i > 0 && containsInt(killed, i-1) {
			continue
		}
		if p.exited() {
			return fmt.Errorf("%s exited early (%v); see its log", p.name, p.err)
		}
	}
	return nil
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// group is worker processes started together and left running: wait
// collects their results when they end by themselves, stop ends them (by
// closing their input) and collects them.
type group struct {
	ws       []*workerProc
	stopHook func() bool
}

// startGroup starts one task per host, waits until all are ready and tells
// them all to go. ctx's end kills them.
func startGroup(ctx context.Context, cfg Config, hosts []Host, tasks []Task, logDir, label string) (*group, error) {
	g := &group{}
	for i, h := range hosts {
		w, err := startWorker(cfg, h, tasks[i], logDir, fmt.Sprintf("%s-%02d", label, i+1))
		if err != nil {
			g.kill()
			return nil, err
		}
		g.ws = append(g.ws, w)
	}
	g.stopHook = context.AfterFunc(ctx, func() {
		for _, w := range g.ws {
			w.in.Close()
			w.p.cmd.Process.Kill()
		}
	})
	for _, w := range g.ws {
		if m, err := w.next(); err != nil || !m.Ready {
			g.kill()
			return nil, errors.Join(err, fmt.Errorf("%s: not ready", w.label))
		}
	}
	for _, w := range g.ws {
		if _, err := io.WriteString(w.in, "go\n"); err != nil {
			g.kill()
			return nil, fmt.Errorf("%s: %w", w.label, err)
		}
	}
	return g, nil
}

// wait collects every worker's result.
func (g *group) wait() ([]Result, error) {
	res := make([]Result, len(g.ws))
	var errs []error
	for i, w := range g.ws {
		m, err := w.next()
		switch {
		case err != nil:
			errs = append(errs, err)
		case m.Result == nil:
			errs = append(errs, fmt.Errorf("%s: expected a result", w.label))
		default:
			res[i] = *m.Result
		}
	}
	return res, errors.Join(errs...)
}

// stop tells every worker to end and collects their results.
func (g *group) stop() ([]Result, error) {
	for _, w := range g.ws {
		w.in.Close()
	}
	return g.wait()
}

// kill ends the workers; safe to call more than once.
func (g *group) kill() {
	if g.stopHook != nil {
		g.stopHook()
	}
	for _, w := range g.ws {
		w.kill()
	}
	g.ws = nil
}
