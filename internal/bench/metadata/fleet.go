package metadata

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs/internal/fleet"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// FleetFigures is the fleet run: many simulated chunkservers holding
// Cluster B's replicas, heartbeating on the chunkserver's schedule, first
// alone (the heartbeat cost), then under a metadata workload.
type FleetFigures struct {
	Servers        int           `json:"servers"`
	ServersPerConn int           `json:"servers_per_conn"`
	Interval       time.Duration `json:"heartbeat_interval_ns"`
	ReportSize     int           `json:"report_size"`
	Restart        time.Duration `json:"restart_to_service_ns"` // fleet started (master open, in safe mode) until every server registered, every chunk located
	// RegisterHandler is the master's time in the registrations' handlers,
	// summed over handlers running at once (lock waits included), and
	// RegisterCalls how many it answered (a server whose call timed out
	// registers again).
	RegisterHandler time.Duration `json:"register_handler_ns"`
	RegisterCalls   int64         `json:"register_calls"`
	// Over the heartbeat window, no workload running: heartbeats
	// answered, the process's CPU time (both ends: the fleet and the
	// master are in this process) and the master's handler time.
	Window      time.Duration `json:"window_ns"`
	Beats       int64         `json:"beats"`
	CPU         time.Duration `json:"cpu_ns"`
	HandlerTime time.Duration `json:"handler_ns"`
	// The workload, heartbeats going on.
	Clients    int                      `json:"clients"`
	Workload   time.Duration            `json:"workload_ns"`
	Ops        int                      `json:"ops"`
	BeatsUnder int64                    `json:"beats_under_load"`
	Latency    map[string]LatencyFigure `json:"latency"` // by operation, and "all"
	// The reference: the same workload, in the same run, over
	// PausedWindow with every server's heartbeats paused.
	PausedWindow time.Duration `json:"paused_window_ns"`
	PausedAll    LatencyFigure `json:"latency_paused"`
}

// pausedFor is the reference window's length at most: with the
// interval before it, well within the master's dead-after (10
// heartbeats), so no server is declared dead meanwhile.
const pausedFor = 10 * time.Second

// LatencyFigure is a latency distribution.
type LatencyFigure struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// CPUPerBeat is the process's CPU time per heartbeat, both ends.
func (f FleetFigures) CPUPerBeat() time.Duration {
	if f.Beats == 0 {
		return 0
	}
	return f.CPU / time.Duration(f.Beats)
}

// callObserver sums the master's time in the chunkservers' Heartbeat and
// Register handlers (its OnCall hook).
type callObserver struct {
	beats, beatNs atomic.Int64
	regs, regNs   atomic.Int64
}

func (o *callObserver) observe(method, _ string, elapsed time.Duration) {
	switch {
	case strings.HasSuffix(method, "/Heartbeat"):
		o.beats.Add(1)
		o.beatNs.Add(int64(elapsed))
	case strings.HasSuffix(method, "/Register"):
		o.regs.Add(1)
		o.regNs.Add(int64(elapsed))
	}
}

// fleetRun moves Cluster B's replicas to a fleet of many servers (each
// chunk's three replicas on three of them), restarts the master so that
// they alone report them, and measures heartbeats and a workload.
func (r *metaRun) fleetRun(ctx context.Context) error {
	cfg, rep := r.cfg, r.rep
	chunks := r.distinctChunks()
	n := cfg.fleetServers()
	ff := FleetFigures{Servers: n, ServersPerConn: cfg.ServersPerConn, Clients: cfg.Clients}
	// The fleet run is about heartbeats, so its master leaves safe mode
	// once the minimum of servers is live (threshold 0); the Cluster B
	// restart keeps the default threshold and measures safe mode's cost.
	// (Safe mode once walked every chunk at every registration, hours at
	// 10,000 servers; it now counts located chunks as they register.)
	r.bm.cfg.SafeModeThreshold = 0
	// The master opens first: its port is free until then, and the
	// fleet's listeners could take it.
	if _, err := r.bm.restart(); err != nil {
		return err
	}
	defer r.bm.close()
	fc := fleet.DefaultConfig()
	fc.Master, fc.Servers, fc.ServersPerConn, fc.IDPrefix = r.bm.addr, n, cfg.ServersPerConn, "fleet-"
	fc.Logger, fc.OnRegister, fc.Capacity = cfg.Logger, r.regs.note, capacityFor(rep.stored(), n)
	fc.HeartbeatInterval = cfg.Heartbeat
	ff.Interval, ff.ReportSize = fc.HeartbeatInterval, fc.ReportSize
	fl, err := fleet.New(fc)
	if err != nil {
		return err
	}
	r.fleet = fl
	defer fl.Close()
	lists := make([][]fleet.Replica, n)
	for j, c := range chunks {
		for k := range 3 {
			lists[(3*j+k)%n] = append(lists[(3*j+k)%n], c)
		}
	}
	for i, l := range lists {
		if err := fl.Hold(i, l); err != nil {
			return err
		}
	}
	lists, chunks = nil, nil
	r.progress("fleet run: %d servers registering with a restarted master", n)
	r.regs.reset(n)
	reg0, regs0 := r.obs.regNs.Load(), r.obs.regs.Load()
	start := time.Now()
	fl.Start()
	if err := r.waitService(ctx, rep.Chunks); err != nil {
		return err
	}
	ff.Restart = r.serviceAt().Sub(start)
	ff.RegisterHandler, ff.RegisterCalls = time.Duration(r.obs.regNs.Load()-reg0), r.obs.regs.Load()-regs0
	rep.Fleet = &ff
	r.progress("fleet run: heartbeats alone for %s, then the workload for %s", cfg.HeartbeatWindow, cfg.FleetWorkload)
	if err := sleepCtx(ctx, fc.HeartbeatInterval); err != nil { // every server heartbeating
		return err
	}
	b0, c0, h0 := fl.Stats().Heartbeats, cpuSpent(), r.obs.beatNs.Load()
	t0 := time.Now()
	if err := sleepCtx(ctx, cfg.HeartbeatWindow); err != nil {
		return err
	}
	ff.Window, ff.Beats, ff.CPU, ff.HandlerTime = time.Since(t0), fl.Stats().Heartbeats-b0, cpuSpent()-c0, time.Duration(r.obs.beatNs.Load()-h0)
	// The reference: heartbeats paused (those in flight answered first).
	fl.Pause(true)
	if err := sleepCtx(ctx, fc.HeartbeatInterval); err != nil {
		fl.Pause(false)
		return err
	}
	tp := time.Now()
	paused, err := r.workload(ctx, min(cfg.FleetWorkload, pausedFor))
	ff.PausedWindow, ff.PausedAll = time.Since(tp), latencies(paused)["all"]
	fl.Pause(false)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, fc.HeartbeatInterval); err != nil { // every server heartbeating again
		return err
	}
	b1 := fl.Stats().Heartbeats
	t1 := time.Now()
	stopProfiles, err := startProfiles(cfg.ProfileDir)
	if err != nil {
		return err
	}
	lat, err := r.workload(ctx, cfg.FleetWorkload)
	err = errors.Join(err, stopProfiles())
	ff.Workload, ff.BeatsUnder = time.Since(t1), fl.Stats().Heartbeats-b1
	ff.Latency = latencies(lat)
	ff.Ops = ff.Latency["all"].N
	return err
}

// distinctChunks lists every chunk the Cluster B fleet holds, once.
func (r *metaRun) distinctChunks() []fleet.Replica {
	var all []fleet.Replica
	for i := range r.fleet.Len() {
		all = append(all, r.fleet.Replicas(i)...)
	}
	slices.SortFunc(all, func(a, b fleet.Replica) int { // each chunk's newest version first
		return cmp.Or(cmp.Compare(a.Handle, b.Handle), cmp.Compare(b.Version, a.Version))
	})
	return slices.CompactFunc(all, func(a, b fleet.Replica) bool { return a.Handle == b.Handle })
}

// cpuSpent is the process's user and system CPU time so far.
func cpuSpent() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// workloadOps is one round of a workload client: a file of its own made,
// looked at, renamed and deleted, and a Cluster B file and directory
// looked up, each operation one RPC.
var workloadOps = []string{"create", "stat", "open", "list", "rename", "delete"}

// workload runs Clients clients over RPC for d and returns each
// operation's latencies.
func (r *metaRun) workload(ctx context.Context, d time.Duration) (map[string][]time.Duration, error) {
	deadline := time.Now().Add(d)
	var mu sync.Mutex // guards out
	out := make(map[string][]time.Duration)
	err := parallel(ctx, r.cfg.Clients, r.cfg.Clients, func(ctx context.Context, c int) error {
		p := rpc.NewPool()
		defer p.Close()
		m, err := p.Master(r.bm.addr)
		if err != nil {
			return err
		}
		o := rpcOps{m}
		prefix := "/fleet-load"
		if err := mkdirAll(ctx, o, fmt.Sprintf("%s/cr/c%d", prefix, c)); err != nil {
			return err
		}
		mine := make(map[string][]time.Duration)
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			for k, v := range mine {
				out[k] = append(out[k], v...)
			}
		}()
		for i := 0; time.Now().Before(deadline); i++ {
			for _, op := range workloadOps {
				start := time.Now()
				if err := oneOp(ctx, o, op, prefix, c, i, r.shape); err != nil {
					return err
				}
				mine[op] = append(mine[op], time.Since(start))
			}
		}
		return nil
	})
	return out, err
}

// latencies summarises each operation's latencies and all of them.
func latencies(by map[string][]time.Duration) map[string]LatencyFigure {
	out := make(map[string]LatencyFigure)
	var all []time.Duration
	for op, l := range by {
		out[op] = latencyOf(l)
		all = append(all, l...)
	}
	out["all"] = latencyOf(all)
	return out
}

func latencyOf(l []time.Duration) LatencyFigure {
	if len(l) == 0 {
		return LatencyFigure{}
	}
	slices.Sort(l)
	at := func(q float64) time.Duration { return l[min(int(q*float64(len(l))), len(l)-1)] }
	return LatencyFigure{N: len(l), P50: at(0.50), P99: at(0.99), Max: l[len(l)-1]}
}

// startProfiles starts the CPU profile and the mutex and block sampling
// when dir is set; the function returned writes cpu.pprof, mutex.pprof
// and block.pprof to dir and stops them.
func startProfiles(dir string) (func() error, error) {
	if dir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		return nil, joinClose(err, cpu)
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	return func() error {
		pprof.StopCPUProfile()
		err := cpu.Close()
		for _, name := range []string{"mutex", "block"} {
			f, ferr := os.Create(filepath.Join(dir, name+".pprof"))
			if ferr == nil {
				ferr = joinClose(pprof.Lookup(name).WriteTo(f, 0), f)
			}
			err = errors.Join(err, ferr)
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		return err
	}, nil
}
