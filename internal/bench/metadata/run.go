package metadata

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs/internal/fleet"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Run is `chunkfs bench metadata`: it builds a namespace of GFS
// Cluster B's shape on a master in this process, over its RPCs, with a
// fleet of simulated chunkservers holding the replicas; prints Table 2
// from the running master; times metadata operations over RPC and
// in-process; measures the master's heap, its checkpoint's write and
// restore, and its restart until every chunk is located again; and runs a
// fleet of thousands of servers heartbeating under a metadata workload.
// A report with what was measured is returned with any error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	load, _ := os.ReadFile("/proc/loadavg")
	rep := &Report{Scale: cfg.Scale, CPUs: runtime.NumCPU(), LoadAvg: string(trimNL(load)), Started: time.Now().UTC()}
	r := &metaRun{cfg: cfg, rep: rep}
	err := r.clusterB(ctx)
	if err == nil {
		err = r.fleetRun(ctx)
	}
	return rep, err
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// metaRun is one run of the benchmark.
type metaRun struct {
	cfg   Config
	rep   *Report
	shape shape
	dead  shape // the files deleted into the trash
	bm    *benchMaster
	fleet *fleet.Fleet
	regs  registrations
	obs   callObserver
}

// progress tells the config's Progress what the run is doing.
func (r *metaRun) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(fmt.Sprintf(format, args...))
	}
}

// registrations records which servers registered since reset, and when
// the last of them did (the fleet's OnRegister hook).
type registrations struct {
	mu   sync.Mutex // guards seen, n and last
	seen []bool
	n    int
	last time.Time
}

func (g *registrations) reset(servers int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen, g.n, g.last = make([]bool, servers), 0, time.Time{}
}

func (g *registrations) note(server, _ int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if server < len(g.seen) && !g.seen[server] {
		g.seen[server] = true
		g.n++
		g.last = time.Now()
	}
}

func (g *registrations) all() (bool, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n == len(g.seen), g.last
}

// clusterB builds Cluster B, reports on it and restarts its master.
func (r *metaRun) clusterB(ctx context.Context) error {
	cfg := r.cfg
	mc := masterConfig(filepath.Join(cfg.Dir, "clusterb"), cfg.NoSync, cfg.Heartbeat, cfg.Lease, cfg.Logger)
	mc.OnCall = r.obs.observe
	r.shape = newShape(cfg.files(), cfg.chunks(), mc.ChunkSize)
	r.dead = deadShape(r.shape, cfg.deadFiles(), cfg.deadChunks())
	rep := r.rep
	rep.Files, rep.Dirs, rep.Chunks, rep.Servers, rep.Bytes = r.shape.files(), r.shape.dirs()+1, r.shape.total, cfg.servers(), r.shape.bytes()
	rep.DeadFiles, rep.DeadChunks, rep.DeadBytes = r.dead.files(), r.dead.total, r.dead.bytes()
	bm, err := startMaster(mc, "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.bm = bm
	defer bm.close()
	fc := fleet.DefaultConfig()
	fc.Master, fc.Servers, fc.Logger, fc.OnRegister = bm.addr, cfg.servers(), cfg.Logger, r.regs.note
	fc.HeartbeatInterval = cfg.Heartbeat
	fc.Capacity = capacityFor(rep.stored(), fc.Servers)
	r.regs.reset(fc.Servers)
	fl, err := fleet.New(fc)
	if err != nil {
		return err
	}
	r.fleet = fl
	defer func() { r.fleet.Close() }()
	fl.Start()
	if err := r.waitService(ctx, 0); err != nil {
		return err
	}
	r.progress("building %d files, %d chunks on %d simulated chunkservers, and %d dead files of %d chunks",
		rep.Files, rep.Chunks, rep.Servers, rep.DeadFiles, rep.DeadChunks)
	if err := r.build(ctx); err != nil {
		return err
	}
	if err := r.table2(ctx); err != nil {
		return err
	}
	r.progress("built in %s; timing operations (%d of each kind, %d clients)", rep.Build.Round(time.Millisecond), cfg.ops(), cfg.Clients)
	if err := r.rates(ctx); err != nil {
		return err
	}
	r.progress("waiting for the build's leases to end (%s), then checkpoint, restore and restart", cfg.Lease)
	if err := r.waitLeases(ctx); err != nil {
		return err
	}
	return r.checkpointAndRestart(ctx)
}

// waitLeases waits until no lease the build was granted may still be held
// and two repair rounds have pruned their records: Cluster B at rest,
// writing nothing, as Table 2 saw it.
func (r *metaRun) waitLeases(ctx context.Context) error {
	start := time.Now()
	for r.bm.m.Figures().Leases > 0 {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return fmt.Errorf("waiting for the build's leases to end: %v", err)
		}
	}
	err := sleepCtx(ctx, 2*r.bm.cfg.RepairInterval)
	r.rep.LeaseWait = time.Since(start)
	return err
}

// capacityFor is each server's disk for data bytes stored three times on
// servers servers as full as Cluster B's.
func capacityFor(data int64, servers int) int64 {
	return int64(float64(data) * 3 / float64(servers) / clusterBFull)
}

// build builds the shape, then the dead files into the trash, and waits
// until the master knows every replica's length from the servers'
// heartbeats.
func (r *metaRun) build(ctx context.Context) error {
	b, err := newBuilder(r.shape, r.fleet, r.bm.addr, 8)
	if err != nil {
		return err
	}
	defer b.close()
	start := time.Now()
	if err := b.build(ctx); err != nil {
		return fmt.Errorf("build Cluster B: %v", err)
	}
	r.rep.Build = time.Since(start)
	start = time.Now()
	if err := b.trash(ctx, r.dead); err != nil {
		return fmt.Errorf("build Cluster B's dead files: %v", err)
	}
	r.rep.DeadBuild = time.Since(start)
	return r.waitUsed(ctx, 3*r.rep.stored())
}

// waitUsed waits until the servers' reported use reaches used bytes.
func (r *metaRun) waitUsed(ctx context.Context, used int64) error {
	for {
		resp, err := r.bm.report(ctx)
		if err != nil {
			return err
		}
		var got int64
		for _, s := range resp.Servers {
			got += s.Used
		}
		if got == used {
			return nil
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("servers report %d bytes used, not %d: %v", got, used, err)
		}
	}
}

// table2 takes Table 2 from the running master and checks its counts.
func (r *metaRun) table2(ctx context.Context) error {
	t, err := r.bm.table2(ctx)
	if err != nil {
		return err
	}
	r.rep.Table2 = t
	if t.Files != int64(r.rep.Files) || t.DeadFiles != int64(r.rep.DeadFiles) || t.Chunks != int64(r.rep.Chunks+r.rep.DeadChunks) || t.Chunkservers != r.rep.Servers {
		return fmt.Errorf("Table 2 shows %d files, %d dead, %d chunks, %d chunkservers; built %d, %d, %d, %d",
			t.Files, t.DeadFiles, t.Chunks, t.Chunkservers, r.rep.Files, r.rep.DeadFiles, r.rep.Chunks+r.rep.DeadChunks, r.rep.Servers)
	}
	r.rep.HeapFormula = r.bm.m.Figures().MetadataBytes
	return nil
}

// rates times the operations over RPC, then in-process.
func (r *metaRun) rates(ctx context.Context) error {
	n := r.cfg.ops()
	var clients []metaClient
	var pools []*rpc.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for range r.cfg.Clients {
		p := rpc.NewPool()
		pools = append(pools, p)
		m, err := p.Master(r.bm.addr)
		if err != nil {
			return err
		}
		clients = append(clients, rpcOps{m})
	}
	got, err := opRun(ctx, "rpc", clients, n, r.shape, "/bench-rpc")
	r.rep.Rates = append(r.rep.Rates, got...)
	if err != nil {
		return err
	}
	direct := make([]metaClient, r.cfg.Clients)
	for i := range direct {
		direct[i] = directOps{r.bm.m.Server()}
	}
	got, err = opRun(ctx, "in-process", direct, n, r.shape, "/bench-inproc")
	r.rep.Rates = append(r.rep.Rates, got...)
	return err
}

// heapNow is the live heap after a full collection.
func heapNow() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// checkpointAndRestart times a checkpoint, measures the master's heap (the
// heap freed when it closes), times the checkpoint's restore alone and
// measures the namespace's heap, then restarts the master and times it
// until every chunk is located from the servers' reports. The fleet is
// paused from the first heap reading to the restart, so that its calls
// allocate nothing between two readings.
func (r *metaRun) checkpointAndRestart(ctx context.Context) error {
	rep := r.rep
	if err := r.writeHeapProfile(); err != nil {
		return err
	}
	r.fleet.Pause(true)
	withMaster := heapNow()
	start := time.Now()
	if err := r.bm.m.Snapshot(); err != nil {
		return err
	}
	rep.Checkpoint = time.Since(start)
	if err := r.bm.close(); err != nil {
		return err
	}
	rep.HeapMaster = withMaster - heapNow()
	snap, err := latestSnapshot(r.bm.cfg.Dir)
	if err != nil {
		return err
	}
	without, err := r.restoreAlone(snap)
	if err != nil {
		return err
	}
	r.regs.reset(r.fleet.Len())
	r.fleet.Pause(false)
	reg0, regs0 := r.obs.regNs.Load(), r.obs.regs.Load()
	start = time.Now()
	open, err := r.bm.restart()
	if err != nil {
		return err
	}
	rep.RestartOpen = open
	if err := r.waitService(ctx, rep.Chunks); err != nil {
		return err
	}
	rep.RestartService = r.serviceAt().Sub(start)
	rep.RestartRegister, rep.RestartRegisterCalls = time.Duration(r.obs.regNs.Load()-reg0), r.obs.regs.Load()-regs0
	rep.HeapAfterRestart = heapNow() - without
	return nil
}

// restoreAlone times restoring the checkpoint file into a namespace of
// its own, with nothing else running, and measures that namespace's heap
// as what dropping it frees: the heap after a full collection with it,
// then without it, nothing else between. It returns the second reading.
// The master here is on plain TCP with no token keys, so after the log's
// header its checkpoint is the namespace's alone (master.state.Snapshot).
func (r *metaRun) restoreAlone(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	r.rep.CheckpointBytes = st.Size()
	var index [8]byte // the log's header: the applied index (oplog's fsmAdapter)
	if _, err := io.ReadFull(f, index[:]); err != nil {
		return 0, fmt.Errorf("read %s: %v", path, err)
	}
	start := time.Now()
	ns, err := namespace.Restore(f)
	if err != nil {
		return 0, fmt.Errorf("restore %s: %v", path, err)
	}
	r.rep.Restore = time.Since(start)
	with := heapNow()
	c, dead := ns.Counts(), ns.DeadCounts()
	runtime.KeepAlive(ns) // and not after: the next reading is without it
	without := heapNow()
	r.rep.HeapNamespace = with - without
	if c.Files != int64(r.rep.Files) || c.Chunks != int64(r.rep.Chunks) || dead.Files != int64(r.rep.DeadFiles) || dead.Chunks != int64(r.rep.DeadChunks) {
		return 0, fmt.Errorf("checkpoint holds %d files and %d chunks, %d and %d dead; built %d and %d, %d and %d",
			c.Files, c.Chunks, dead.Files, dead.Chunks, r.rep.Files, r.rep.Chunks, r.rep.DeadFiles, r.rep.DeadChunks)
	}
	return without, nil
}

// latestSnapshot is the newest checkpoint's state file in dir.
func latestSnapshot(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no checkpoint in %s", dir)
	}
	sort.Slice(files, func(i, j int) bool {
		a, _ := os.Stat(files[i])
		b, _ := os.Stat(files[j])
		return a.ModTime().Before(b.ModTime())
	})
	return files[len(files)-1], nil
}

func (r *metaRun) writeHeapProfile() error {
	if r.cfg.HeapProfile == "" {
		return nil
	}
	f, err := os.Create(r.cfg.HeapProfile)
	if err != nil {
		return err
	}
	runtime.GC()
	err = pprof.WriteHeapProfile(f)
	return joinClose(err, f)
}

func joinClose(err error, f *os.File) error {
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// serviceAt is when the master was back in full service: the last
// registration it accepted, after which (waitService checked) its report
// found every chunk located.
func (r *metaRun) serviceAt() time.Time {
	_, last := r.regs.all()
	return last
}

// waitService waits until every server has registered since the last
// reset and the master, out of safe mode, knows a live replica of each of
// its chunks (chunks of them) and all of every chunk's replicas.
func (r *metaRun) waitService(ctx context.Context, chunks int) error {
	for {
		all, _ := r.regs.all()
		if all {
			resp, err := r.bm.report(ctx)
			if err != nil {
				return err
			}
			if !resp.SafeMode && resp.Missing == 0 && resp.UnderReplicated == 0 && resp.Chunks == int64(chunks) {
				return nil
			}
		}
		// A report walks every chunk under the registry's lock: asked
		// for often, it would slow what it waits for.
		wait := 20 * time.Millisecond
		if all {
			wait = 250 * time.Millisecond
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return fmt.Errorf("waiting for every chunkserver to report: %v", err)
		}
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
