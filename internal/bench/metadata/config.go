package metadata

import (
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/chunkfs/chunkfs"
)

// Cluster B of the GFS paper's Table 2: what `chunkfs bench metadata`
// builds at scale 1.
const (
	clusterBFiles     = 737_000
	clusterBDeadFiles = 232_000
	clusterBChunks    = 1_550_000
	clusterBServers   = 227
	clusterBFull      = 155.0 / 180.0 // used over available disk space
)

// Config configures `chunkfs bench metadata`.
type Config struct {
	// Scale shrinks Cluster B's files, chunks and chunkservers by this
	// factor (1: the paper's cluster; 0.01: a small form).
	Scale float64
	// Dir holds the masters' data directories.
	Dir string
	// Clients is the number of client goroutines of the operation rates
	// and of the fleet run's workload.
	Clients int
	// Ops is how many operations of each kind the rates time, at scale 1.
	Ops int
	// FleetServers is the fleet run's simulated chunkservers, whatever
	// the scale (they hold Cluster B's replicas, three a chunk);
	// ServersPerConn of them share a connection to the master.
	FleetServers   int
	ServersPerConn int
	// FleetWorkload is how long the fleet run's metadata workload lasts;
	// the heartbeat cost is measured over HeartbeatWindow before it, with
	// no workload.
	FleetWorkload   time.Duration
	HeartbeatWindow time.Duration
	// Heartbeat is the chunkservers' heartbeat interval, the master's and
	// the fleet's alike (the chunkserver's default: 3 s).
	Heartbeat time.Duration
	// Lease is the master's lease duration (chunkfs.LeaseDuration: 60
	// s); the heap is measured once the build's leases have ended.
	Lease time.Duration
	// NoSync skips fsync of the masters' logs (tests of the CPU path).
	NoSync bool
	// HeapProfile, when set, receives a heap profile (pprof) taken with
	// the Cluster B namespace built.
	HeapProfile string
	// ProfileDir, when set, receives CPU, mutex and block profiles
	// (pprof) of the fleet run's workload: cpu.pprof, mutex.pprof and
	// block.pprof.
	ProfileDir string
	// Progress, when set, is told what the run is doing as it goes.
	Progress func(string)
	Logger   *slog.Logger
}

// DefaultConfig returns the full-scale run: Cluster B, 16
// clients, 50,000 operations of each kind, a fleet of 10,000 servers (10
// a connection) heartbeating under a 30 s workload.
func DefaultConfig() Config {
	return Config{
		Scale: 1, Clients: 16, Ops: 50_000, FleetServers: 10_000, ServersPerConn: 10,
		FleetWorkload: 30 * time.Second, HeartbeatWindow: 9 * time.Second, Heartbeat: 3 * time.Second,
		Lease:  chunkfs.LeaseDuration,
		Logger: slog.Default(),
	}
}

// Validate reports the first configuration error.
func (c Config) Validate() error {
	switch {
	case !(c.Scale > 0 && c.Scale <= 1):
		return errors.New("bench metadata: --scale must be in (0, 1]")
	case c.Dir == "":
		return errors.New("bench metadata: Dir is empty")
	case c.Clients < 1 || c.Clients > 1024:
		return errors.New("bench metadata: --clients must be in [1, 1024]")
	case c.Ops < 1:
		return errors.New("bench metadata: --ops must be positive")
	case c.FleetServers < 3 || c.FleetServers > 10_000:
		return errors.New("bench metadata: --fleet must be in [3, 10000]")
	case c.ServersPerConn < 1:
		return errors.New("bench metadata: --servers-per-conn must be positive")
	case c.FleetWorkload <= 0 || c.HeartbeatWindow <= 0 || c.Heartbeat <= 0:
		return errors.New("bench metadata: --workload, --heartbeat-window and --heartbeat must be positive")
	case c.Lease < 10*time.Millisecond:
		return errors.New("bench metadata: Lease must be at least 10ms")
	case c.Logger == nil:
		return errors.New("bench metadata: Logger is nil")
	}
	return nil
}

// scaled is n times the scale, at least least.
func (c Config) scaled(n, least int) int {
	return max(int(math.Round(float64(n)*c.Scale)), least)
}

func (c Config) files() int     { return c.scaled(clusterBFiles, 10) }
func (c Config) deadFiles() int { return c.scaled(clusterBDeadFiles, 3) }

// chunks and deadChunks share Table 2's chunks (which counts the dead
// files' too) between the live and the dead files, as many a file.
func (c Config) chunks() int {
	all := max(c.scaled(clusterBChunks, 10), c.files()+c.deadFiles())
	return max(int(math.Round(float64(all)*float64(c.files())/float64(c.files()+c.deadFiles()))), c.files())
}

func (c Config) deadChunks() int {
	return max(c.scaled(clusterBChunks, 10), c.files()+c.deadFiles()) - c.chunks()
}

func (c Config) servers() int      { return c.scaled(clusterBServers, 3) }
func (c Config) fleetServers() int { return c.FleetServers }
func (c Config) ops() int          { return c.scaled(c.Ops, 100) }
