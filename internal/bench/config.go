package bench

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

// Config describes a benchmark run.
type Config struct {
	Testbed   TestbedConfig
	Clients   []int      // the values of N, each at most Testbed.Clients
	Workloads []Workload // in the order to run them
	// Scale is the testbed's rates relative to the paper's (100 Mbit/s NICs,
	// a 1 Gbit/s link); it is reported, the rates themselves are in Testbed.
	Scale float64
	// Duration is about how long each point should take at its theoretical
	// limit: every client moves limit/N × Duration bytes, rounded up to
	// whole operations, as the paper's clients each move a fixed amount.
	// DefaultConfig's 80 s is the paper's: a client moved 1 GB at up to
	// 12.5 MB/s; at scale s it moves s GB at s × 12.5 MB/s, in as long.
	// A read point ends with the slowest of N readers, each reading random
	// 4 MB regions, so its figure is noisy when each reads only a few: at
	// 20 s (6 regions each), reads at N = 8 spread over 80-94 %, at 80 s
	// (24) over 90-93 % (docs/architecture.md §10).
	Duration   time.Duration
	ReadSize   int64 // one read region (the paper: 4 MB)
	WriteSize  int64 // one write (the paper: 1 MB)
	RecordSize int64 // one record append
	Replicas   int   // the cluster's replication factor, for the limits
	// ChunkSize is the chunk size of the file system the reads and record
	// appends run on (0: chunkfs.DefaultChunkSize, 64 MiB, as in the paper).
	ChunkSize int64
	// WriteChunkSize is the chunk size of the write panel's labelled
	// variant, run after the other panels on a cluster of its own (0, or
	// the same as ChunkSize: none). The headline writes run on ChunkSize's
	// chunks, the paper's 64 MiB. The paper's writers each wrote 1 GB, 16
	// chunks; the scaled run's writers write limit/N × Duration, 33-100 MB
	// at 80 s, one or two 64 MiB chunks, so that every file sits on the
	// same three servers for most of the point and no placement can spread
	// 3N replicas evenly over the chunkservers (N = 8: 24 on 16, at most
	// 75 % of the limit). DefaultConfig's variant writes on 1 MiB chunks,
	// so that a writer's file spans many chunks as the paper's spanned 16.
	WriteChunkSize int64
	// ReadSetFiles files of ReadSetFileSize bytes are written, unshaped,
	// before the reads; readers pick regions among them at random.
	ReadSetFiles    int
	ReadSetFileSize int64
	// Binary is the chunkfs executable whose master and chunkserver
	// subcommands run the cluster.
	Binary string
	// WorkerArgv runs WorkerMain (e.g. chunkfs bench-worker).
	WorkerArgv []string
	// MasterArgs and ChunkserverArgs are appended to the servers' command
	// lines.
	MasterArgs      []string
	ChunkserverArgs []string
	// WorkDir holds the servers' data and every process's log, in a fresh
	// directory removed after a successful run; "" means os.TempDir().
	WorkDir string
	// Calibrate first measures raw TCP across the testbed for every N.
	Calibrate bool
	// Probe times each step of one client's writes and appends on the idle
	// cluster, to trace a shortfall to the step that costs it.
	Probe bool
	// Warmup has one client write WarmupWrites writes to every fresh
	// cluster before its first point, unmeasured, so that no point pays
	// for the cluster's first chunk, leases and data connections (and,
	// under TLS, their handshakes) while later points do not: the paper
	// measured a running cluster.
	Warmup bool
	// NetworkOnly builds the testbed and calibrates it, with no cluster.
	NetworkOnly bool
	// Events makes the report's files include gfs.json: the whole report
	// with every client's operation times and trace events (megabytes).
	Events bool
	// TLS runs the cluster with mutual TLS on every connection: a CA and
	// certificates are made in the run's directory; otherwise every
	// process runs --insecure.
	TLS bool
}

// MiB is 2^20 bytes, the unit of I/O sizes; rates are in MB (10^6 bytes) per
// second, as in the paper.
const MiB = 1 << 20

// DefaultConfig returns the paper's experiment at 1/10 of its network rates.
func DefaultConfig() Config {
	return Config{
		Testbed:         DefaultTestbedConfig(),
		Clients:         []int{1, 2, 4, 8, 16},
		Workloads:       Workloads,
		Scale:           0.1,
		Duration:        80 * time.Second,
		ReadSize:        4 * MiB,
		WriteSize:       1 * MiB,
		RecordSize:      1 * MiB,
		Replicas:        3,
		WriteChunkSize:  1 * MiB,
		ReadSetFiles:    16,
		ReadSetFileSize: 64 * MiB,
		Calibrate:       true,
		Probe:           true,
		Warmup:          true,
	}
}

// QuickConfig returns a smoke run CI can afford: three chunkservers, N = 1
// and 2, a few seconds a point.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Testbed.Chunkservers = 3
	c.Testbed.Clients = 2
	c.Clients = []int{1, 2}
	c.Duration = 2 * time.Second
	c.ReadSetFiles = 2
	c.ReadSetFileSize = 8 * MiB
	return c
}

// WithScale sets the testbed's rates to the paper's times scale.
func (c *Config) WithScale(scale float64) {
	c.Scale = scale
	c.Testbed.NIC = Rate(100e6 * scale)
	c.Testbed.Link = Rate(1000e6 * scale)
}

// Network returns what the limits are derived from.
func (c Config) Network() Network {
	return Network{NIC: c.Testbed.NIC, Link: c.Testbed.Link, Chunkservers: c.Testbed.Chunkservers, Replicas: c.Replicas}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if err := c.Testbed.Validate(); err != nil {
		return err
	}
	switch {
	case len(c.Clients) == 0 || (len(c.Workloads) == 0 && !c.NetworkOnly):
		return errors.New("bench: no client counts or no workloads")
	case slices.Min(c.Clients) < 1 || slices.Max(c.Clients) > c.Testbed.Clients:
		return fmt.Errorf("bench: client counts %v must be within 1-%d", c.Clients, c.Testbed.Clients)
	case c.Duration <= 0 || c.Duration > time.Hour:
		return fmt.Errorf("bench: duration %v out of range", c.Duration)
	case c.ReadSize <= 0 || c.WriteSize <= 0 || c.RecordSize <= 0 || c.ReadSetFileSize < c.ReadSize:
		return errors.New("bench: I/O sizes must be positive and a read-set file must hold a read region")
	case c.ReadSetFiles < 1 || c.ReadSetFiles > 4096:
		return fmt.Errorf("bench: read set of %d files out of range 1-4096", c.ReadSetFiles)
	case c.Replicas < 1 || c.Replicas > c.Testbed.Chunkservers:
		return fmt.Errorf("bench: %d replicas need as many chunkservers (have %d)", c.Replicas, c.Testbed.Chunkservers)
	case !validChunkSize(c.ChunkSize) || !validChunkSize(c.WriteChunkSize):
		return fmt.Errorf("bench: chunk sizes %d and %d must be multiples of 64 KiB up to 4 GiB (0: the master's default)", c.ChunkSize, c.WriteChunkSize)
	case slices.Contains(c.Workloads, Appends) && c.RecordSize > chunkfs.MaxRecordSize(c.chunkSize(Appends))-client.RecordHeaderSize:
		return fmt.Errorf("bench: a %d-byte record and its header do not fit in a quarter of a %d-byte chunk", c.RecordSize, c.chunkSize(Appends))
	case c.Binary == "" || len(c.WorkerArgv) == 0:
		return errors.New("bench: no chunkfs binary or no worker command")
	}
	return nil
}

// perClientBytes is how much each of n clients moves in a point of w: its
// share of the limit for Duration, rounded up to whole operations.
func (c Config) perClientBytes(w Workload, n int) int64 {
	io := c.ioSize(w)
	want := c.Network().Limit(w, n) / float64(n) * 1e6 * c.Duration.Seconds()
	ops := max(int64(want/float64(io)+0.999), 1)
	return ops * io
}

func (c Config) ioSize(w Workload) int64 {
	switch w {
	case Reads:
		return c.ReadSize
	case Writes:
		return c.WriteSize
	default:
		return c.RecordSize
	}
}

// chunkSize is the chunk size of the file system workload w's headline
// panel runs on.
func (c Config) chunkSize(Workload) int64 {
	return cmp.Or(c.ChunkSize, chunkfs.DefaultChunkSize)
}

// Panel is one series of Figure 3: a workload on a file system of one
// chunk size, its headline or a labelled variant.
type Panel struct {
	Workload  Workload
	ChunkSize int64
	Variant   bool
}

// panels lists the series to run, in order: each workload's headline, then
// the writes' variant (WriteChunkSize) if there is one, so that the
// headlines share one cluster.
func (c Config) panels() []Panel {
	var out []Panel
	for _, w := range c.Workloads {
		out = append(out, Panel{Workload: w, ChunkSize: c.chunkSize(w)})
	}
	if v := c.WriteChunkSize; slices.Contains(c.Workloads, Writes) && v != 0 && v != c.chunkSize(Writes) {
		out = append(out, Panel{Workload: Writes, ChunkSize: v, Variant: true})
	}
	return out
}

func validChunkSize(n int64) bool {
	return n == 0 || (n > 0 && n%chunkfs.BlockSize == 0 && n <= 4<<30)
}
