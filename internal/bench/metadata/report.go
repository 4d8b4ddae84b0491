package metadata

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chunkfs/chunkfs/internal/status"
)

// Report is what `chunkfs bench metadata` measured.
type Report struct {
	Scale   float64   `json:"scale"`
	CPUs    int       `json:"cpus"`
	LoadAvg string    `json:"loadavg"` // the machine's /proc/loadavg at the start
	Started time.Time `json:"started"`

	Files, Dirs, Chunks, Servers int   // built: files, directories (with the root's), chunks, chunkservers
	Bytes                        int64 `json:"bytes"` // the files' data
	Build                        time.Duration
	// The dead files: built as the others, then deleted one by one into
	// the trash, chunks and all (DeadBuild: both).
	DeadFiles, DeadChunks int
	DeadBytes             int64 `json:"dead_bytes"`
	DeadBuild             time.Duration

	Table2 status.Table2 `json:"table2"`
	// Heap: the master's (what its Close frees), the namespace's alone
	// (restored from the checkpoint, what dropping it frees), the
	// master's after the restart, and Table 2's formula (master.Figures);
	// the fleet paused for the first two.
	HeapMaster, HeapNamespace, HeapAfterRestart, HeapFormula int64
	LeaseWait                                                time.Duration // from the operation rates until the build's leases ended

	Rates []OpRate `json:"rates"`

	Checkpoint           time.Duration `json:"checkpoint_ns"` // a Raft snapshot, written
	CheckpointBytes      int64         `json:"checkpoint_bytes"`
	Restore              time.Duration `json:"restore_ns"`      // the checkpoint file into a namespace, alone
	RestartOpen          time.Duration `json:"restart_open_ns"` // master.Open: restore, log replay, election
	RestartService       time.Duration `json:"restart_service_ns"`
	RestartRegister      time.Duration `json:"restart_register_ns"`    // the master's time in the registrations' handlers, summed over concurrent ones
	RestartRegisterCalls int64         `json:"restart_register_calls"` // Register calls answered (a server whose call timed out registers again)

	Fleet *FleetFigures `json:"fleet,omitempty"`
}

// paperB is Table 2's column for Cluster B, by row name.
var paperB = map[string]string{
	"Chunkservers": "227", "Available disk space": "180 TB", "Used disk space": "155 TB",
	"Number of files": "737 k", "Number of dead files": "232 k", "Number of chunks": "1550 k",
	"Metadata at chunkservers": "21 GB", "Metadata at master": "60 MB",
}

// hdfs is HDFS's published NNThroughputBenchmark figures (one NameNode,
// in-process), by operation.
var hdfs = map[string]string{"create": "5.6 k/s", "open": "126 k/s"}

// stored is the data the servers hold: the live and dead files', once.
func (r *Report) stored() int64 { return r.Bytes + r.DeadBytes }

// Text renders the report: Table 2 beside the paper's, the rates beside
// HDFS's, and the heap, checkpoint, restart and fleet figures.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chunkfs bench metadata, scale %g: %d files in %d directories, %d chunks, %d simulated chunkservers; built in %s\n",
		r.Scale, r.Files, r.Dirs, r.Chunks, r.Servers, r.Build.Round(time.Millisecond))
	fmt.Fprintf(&b, "  and %d dead files of %d chunks, built and deleted one by one into the trash in %s\n",
		r.DeadFiles, r.DeadChunks, r.DeadBuild.Round(time.Millisecond))
	fmt.Fprintf(&b, "machine: %d CPUs, load average at start %s (shared: rates are comparable within one run only)\n\n", r.CPUs, r.LoadAvg)
	r.table2Text(&b)
	r.heapText(&b)
	r.ratesText(&b)
	r.restartText(&b)
	r.fleetText(&b)
	return b.String()
}

func (r *Report) table2Text(b *strings.Builder) {
	fmt.Fprintf(b, "Table 2 (from the running master)\n")
	w := tabwriter.NewWriter(b, 2, 8, 2, ' ', 0)
	fmt.Fprintf(w, "\tchunkfs\tGFS Cluster B\tnote\n")
	for _, row := range r.Table2.Rows() {
		note := ""
		switch row.Name {
		case "Number of dead files":
			note = fmt.Sprintf("in the trash, with %d chunks beside the live files'", r.DeadChunks)
		case "Metadata at master":
			note = "Table 2's formula (master.Figures); measured heap below"
		case "Used disk space", "Available disk space":
			note = "reported by the simulated servers: all files' lengths, three replicas"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", row.Name, row.Value, paperB[row.Name], note)
	}
	w.Flush()
	b.WriteString("\n")
}

func (r *Report) heapText(b *strings.Builder) {
	perFile := func(n int64) string {
		files, chunks := r.Files+r.DeadFiles, r.Chunks+r.DeadChunks
		return fmt.Sprintf("%s (%.0f B a file, %.0f B a chunk if all were chunks')", status.Bytes(n), float64(n)/float64(files), float64(n)/float64(chunks))
	}
	fmt.Fprintf(b, "Master heap (runtime.ReadMemStats after a full GC, a file or chunk live or dead; GFS Cluster B: 60 MB),\n")
	fmt.Fprintf(b, "  at rest: %s after the operation rates, the build's leases ended\n", r.LeaseWait.Round(time.Second))
	fmt.Fprintf(b, "  master, freed by its Close:      %s\n", perFile(r.HeapMaster))
	fmt.Fprintf(b, "  namespace alone, from checkpoint: %s\n", perFile(r.HeapNamespace))
	fmt.Fprintf(b, "  master after restart and reports: %s\n", perFile(r.HeapAfterRestart))
	fmt.Fprintf(b, "  Table 2's formula:                %s\n\n", status.Bytes(r.HeapFormula))
}

func (r *Report) ratesText(b *strings.Builder) {
	fmt.Fprintf(b, "Operation rates (NNThroughputBenchmark's form; HDFS: one NameNode, in-process)\n")
	w := tabwriter.NewWriter(b, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "op\tclients\tops\tover RPC\tin-process\tHDFS\t\n")
	byOp := make(map[string]map[string]OpRate)
	for _, x := range r.Rates {
		if byOp[x.Op] == nil {
			byOp[x.Op] = make(map[string]OpRate)
		}
		byOp[x.Op][x.Mode] = x
	}
	for _, op := range rateOps {
		m := byOp[op]
		if m == nil {
			continue
		}
		rate := func(mode string) string {
			if x, ok := m[mode]; ok {
				return fmt.Sprintf("%.0f/s", x.PerSecond())
			}
			return "-"
		}
		x := m["rpc"]
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t\n", op, x.Clients, x.Ops, rate("rpc"), rate("in-process"), orDash(hdfs[op]))
	}
	w.Flush()
	b.WriteString("\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (r *Report) restartText(b *strings.Builder) {
	fmt.Fprintf(b, "Checkpoint and restart (targets: 2 s, 2 s, 5 s)\n")
	fmt.Fprintf(b, "  checkpoint (Raft snapshot) written: %s, %s\n", r.Checkpoint.Round(time.Millisecond), status.Bytes(r.CheckpointBytes))
	fmt.Fprintf(b, "  checkpoint restored alone:          %s\n", r.Restore.Round(time.Millisecond))
	fmt.Fprintf(b, "  restart to service:                 %s (master.Open %s, then %d servers' registrations until every chunk is located;\n", r.RestartService.Round(time.Millisecond), r.RestartOpen.Round(time.Millisecond), r.Servers)
	fmt.Fprintf(b, "                                      %d Register calls answered, their handlers' times summed %s)\n\n", r.RestartRegisterCalls, r.RestartRegister.Round(time.Millisecond))
}

func (r *Report) fleetText(b *strings.Builder) {
	f := r.Fleet
	if f == nil {
		return
	}
	fmt.Fprintf(b, "Fleet: %d simulated chunkservers (%d a connection), heartbeats every %s with samples of up to %d chunks\n",
		f.Servers, f.ServersPerConn, f.Interval, f.ReportSize)
	fmt.Fprintf(b, "  fleet started until every chunk located (safe mode threshold 0): %s (%d Register calls, handlers summed %s)\n",
		f.Restart.Round(time.Millisecond), f.RegisterCalls, f.RegisterHandler.Round(time.Millisecond))
	beatsPerSec := float64(f.Beats) / f.Window.Seconds()
	fmt.Fprintf(b, "  heartbeats alone: %.0f/s over %s; CPU %s a heartbeat (fleet and master, one process), master handler %s a heartbeat;\n",
		beatsPerSec, f.Window.Round(time.Millisecond), f.CPUPerBeat().Round(time.Microsecond), perBeat(f.HandlerTime, f.Beats))
	fmt.Fprintf(b, "    %.2f ms of CPU a second per server, %.2f CPUs for the fleet\n",
		float64(f.CPUPerBeat())/float64(time.Millisecond)/f.Interval.Seconds(), float64(f.CPU)/float64(f.Window))
	fmt.Fprintf(b, "  workload: %d clients over RPC for %s, %d ops (%.0f/s), %.0f heartbeats/s meanwhile\n",
		f.Clients, f.Workload.Round(time.Millisecond), f.Ops, float64(f.Ops)/f.Workload.Seconds(), float64(f.BeatsUnder)/f.Workload.Seconds())
	w := tabwriter.NewWriter(b, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "    op\tn\tp50\tp99\tmax\t\n")
	ops := make([]string, 0, len(f.Latency))
	for op := range f.Latency {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		l := f.Latency[op]
		fmt.Fprintf(w, "    %s\t%d\t%s\t%s\t%s\t\n", op, l.N, l.P50.Round(time.Microsecond), l.P99.Round(time.Microsecond), l.Max.Round(time.Microsecond))
	}
	w.Flush()
	if p := f.PausedAll; p.N > 0 {
		fmt.Fprintf(b, "  reference, heartbeats paused, %s: %d ops, p50 %s, p99 %s, max %s\n", f.PausedWindow.Round(time.Millisecond),
			p.N, p.P50.Round(time.Microsecond), p.P99.Round(time.Microsecond), p.Max.Round(time.Microsecond))
	}
	fmt.Fprintf(b, "  target: p99 of all operations ≤ 10 ms\n")
}

func perBeat(d time.Duration, n int64) time.Duration {
	if n == 0 {
		return 0
	}
	return (d / time.Duration(n)).Round(time.Microsecond)
}
