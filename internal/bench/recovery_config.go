package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
)

// RecoveryConfig describes a run of `chunkfs bench recovery`: fill the
// cluster, SIGKILL one chunkserver and time the re-replication back to
// Replicas copies of every chunk; then (Second) kill two more and time the
// healing of the chunks left with one replica, then of all; readers and
// writers run throughout, so that their rates before and during each
// recovery can be compared.
type RecoveryConfig struct {
	Testbed TestbedConfig
	// Events makes the report's files include recovery.json: the whole
	// report, every sample included.
	Events bool
	Scale  float64 // the testbed's rates relative to the paper's, reported
	// ChunkSize is the file system's chunk size. GFS's 64 MB chunks at this
	// testbed's NIC rates would make a few dozen chunks take many minutes;
	// smaller chunks keep the chunk count (and so the scheduling the run
	// exercises) while the data fits the machine.
	ChunkSize int64
	Replicas  int
	// FillBytes of payload are written, unshaped, in files of FileBytes,
	// before the clients start.
	FillBytes int64
	FileBytes int64
	IOSize    int64 // one read region and one write
	Readers   int   // clients reading random regions of the fill files
	Writers   int   // clients writing new files
	// Baseline is how long the clients run before the first kill; their
	// rate over it is the reference.
	Baseline time.Duration
	// CloneRate is each chunkserver's clone throttle in bytes a second
	// (chunkserver --clone-rate; 0: unlimited), CloneSourceRate its
	// throttle of the clones it sources (--clone-source-rate),
	// UrgentYieldRate what its other reads share while it sources an
	// urgent clone (--urgent-yield-rate), CloneStreams its clones at once (--clone-streams), MaxClones the
	// master's clones in flight per server as source or target (master
	// --max-clones), DeadAfter the master's silence before a chunkserver
	// is dead (--dead-after).
	CloneRate       int64
	CloneSourceRate int64
	UrgentYieldRate int64
	CloneStreams    int
	MaxClones       int
	DeadAfter       time.Duration
	Heartbeat       time.Duration // the chunkservers' heartbeat interval (--heartbeat)
	// Lease is the master's lease duration (--lease). The master clones
	// no chunk under a lease (a clone could miss a write), so the first
	// kill waits until the fill's leases have ended: the data a failure
	// finds is old, as in GFS's measurement. The writers' chunks of the
	// last lease still wait for theirs.
	Lease        time.Duration
	Second       bool          // also kill two chunkservers after the first recovery
	PhaseTimeout time.Duration // the longest a recovery may take before the run gives up
	Sample       time.Duration // how often the watcher asks the master
	// Binary is the chunkfs executable, WorkerArgv runs WorkerMain.
	Binary     string
	WorkerArgv []string
	// MasterArgs and ChunkserverArgs are appended to the servers' command
	// lines after the flags the run sets.
	MasterArgs      []string
	ChunkserverArgs []string
	WorkDir         string // as Config.WorkDir
}

// DefaultRecoveryPrefix starts the names of the recovery testbed's
// namespaces, apart from bench gfs's so that both can run on one machine.
const DefaultRecoveryPrefix = "rec-"

// DefaultRecoveryConfig returns the run this 2-core machine carries in
// about ten minutes: 8 chunkservers with the bench gfs testbed's 10 Mbit/s
// NICs (1/10 of the paper's), 384 MiB in 4 MiB chunks (96 chunks, 36 on
// each server), 2 readers and 1 writer, clone throttles of half a NIC
// each way.
func DefaultRecoveryConfig() RecoveryConfig {
	tb := DefaultTestbedConfig()
	tb.Prefix = DefaultRecoveryPrefix
	tb.Chunkservers = 8
	tb.Clients = 4
	return RecoveryConfig{
		Testbed:         tb,
		Scale:           0.1,
		ChunkSize:       4 * MiB,
		Replicas:        3,
		FillBytes:       384 * MiB,
		FileBytes:       32 * MiB,
		IOSize:          1 * MiB,
		Readers:         2,
		Writers:         1,
		Baseline:        30 * time.Second,
		CloneRate:       int64(tb.NIC.MBps() * 1e6 / 2),
		CloneSourceRate: int64(tb.NIC.MBps() * 1e6 / 2),
		UrgentYieldRate: int64(tb.NIC.MBps() * 1e6 / 2),
		CloneStreams:    2,
		MaxClones:       2,
		DeadAfter:       5 * time.Second,
		Heartbeat:       time.Second,
		Lease:           chunkfs.LeaseDuration,
		Second:          true,
		PhaseTimeout:    20 * time.Minute,
		Sample:          500 * time.Millisecond,
	}
}

// QuickRecoveryConfig returns a run of a few minutes: 7 chunkservers, 96
// MiB, one reader and one writer.
func QuickRecoveryConfig() RecoveryConfig {
	c := DefaultRecoveryConfig()
	c.Testbed.Chunkservers = 7
	c.Testbed.Clients = 3
	c.FillBytes = 96 * MiB
	c.FileBytes = 16 * MiB
	c.Readers, c.Writers = 1, 1
	c.Baseline = 10 * time.Second
	c.PhaseTimeout = 5 * time.Minute
	return c
}

// WithScale sets the testbed's rates to the paper's times scale, and the
// clone throttles and the urgent yield rate to half a NIC.
func (c *RecoveryConfig) WithScale(scale float64) {
	c.Scale = scale
	c.Testbed.NIC = Rate(100e6 * scale)
	c.Testbed.Link = Rate(1000e6 * scale)
	c.CloneRate = int64(c.Testbed.NIC.MBps() * 1e6 / 2)
	c.CloneSourceRate, c.UrgentYieldRate = c.CloneRate, c.CloneRate
}

// kills is how many chunkservers the run kills in all.
func (c RecoveryConfig) kills() int {
	if c.Second {
		return 3
	}
	return 1
}

// Validate reports the first invalid field.
func (c RecoveryConfig) Validate() error {
	if err := c.Testbed.Validate(); err != nil {
		return err
	}
	switch {
	case c.Replicas < 2:
		return fmt.Errorf("bench recovery: %d replicas: nothing to recover from", c.Replicas)
	case c.Testbed.Chunkservers-c.kills() < c.Replicas:
		return fmt.Errorf("bench recovery: %d chunkservers less the %d killed leave fewer than %d replicas' worth", c.Testbed.Chunkservers, c.kills(), c.Replicas)
	case c.Testbed.Clients < c.Readers+c.Writers+1:
		return fmt.Errorf("bench recovery: %d client hosts for %d readers, %d writers and the watcher", c.Testbed.Clients, c.Readers, c.Writers)
	case !validChunkSize(c.ChunkSize) || c.ChunkSize == 0:
		return fmt.Errorf("bench recovery: chunk size %d must be a multiple of %d up to 4 GiB", c.ChunkSize, chunkfs.BlockSize)
	case c.IOSize <= 0 || c.FileBytes < c.IOSize || c.FillBytes < c.FileBytes:
		return errors.New("bench recovery: I/O size, file size and fill must be positive and each hold the one before")
	case c.FillBytes/c.FileBytes > 4096:
		return fmt.Errorf("bench recovery: %d fill files: more than 4096", c.FillBytes/c.FileBytes)
	case c.Readers < 0 || c.Writers < 0:
		return errors.New("bench recovery: negative readers or writers")
	case c.Baseline <= 0 || c.PhaseTimeout <= 0 || c.Sample <= 0 || c.Heartbeat <= 0 || c.DeadAfter <= c.Heartbeat || c.Lease <= 0:
		return errors.New("bench recovery: durations must be positive, dead-after above the heartbeat")
	case c.CloneRate < 0 || c.CloneSourceRate < 0 || c.UrgentYieldRate < 0 || c.CloneStreams < 1 || c.MaxClones < 1:
		return errors.New("bench recovery: clone throttles out of range")
	case c.Binary == "" || len(c.WorkerArgv) == 0:
		return errors.New("bench recovery: no chunkfs binary or no worker command")
	}
	return nil
}

// recoveryLoadDir holds the files the writers write during the run.
const recoveryLoadDir = "/bench/recovery/load"

// clusterConfig is the bench gfs Config that startCluster, the workers and
// the read set's writing take: the binaries, the servers' flags, and the
// fill as the read set.
func (c RecoveryConfig) clusterConfig() Config {
	master := append([]string{"--dead-after", c.DeadAfter.String(), "--max-clones", fmt.Sprint(c.MaxClones),
		"--clone-min-rate", fmt.Sprint(c.cloneMinRate()), "--lease", c.Lease.String(),
		"--replication", fmt.Sprint(c.Replicas)}, c.MasterArgs...)
	cs := append([]string{"--heartbeat", c.Heartbeat.String(), "--clone-rate", fmt.Sprint(c.CloneRate), "--clone-source-rate", fmt.Sprint(c.CloneSourceRate),
		"--urgent-yield-rate", fmt.Sprint(c.UrgentYieldRate), "--clone-streams", fmt.Sprint(c.CloneStreams)}, c.ChunkserverArgs...)
	g := DefaultConfig()
	g.Testbed, g.Binary, g.WorkerArgv, g.MasterArgs, g.ChunkserverArgs, g.WorkDir = c.Testbed, c.Binary, c.WorkerArgv, master, cs, c.WorkDir
	g.Replicas, g.ChunkSize, g.WriteSize = c.Replicas, c.ChunkSize, c.IOSize
	g.ReadSetFiles, g.ReadSetFileSize = int(c.FillBytes/c.FileBytes), c.FileBytes
	return g
}

// cloneMinRate is the master's --clone-min-rate: a quarter of what one
// clone stream gets at the throttles or a NIC, so that a clone slowed by
// the clients' traffic still makes its deadline.
func (c RecoveryConfig) cloneMinRate() int64 {
	per := c.Testbed.NIC.MBps() * 1e6
	for _, r := range []int64{c.CloneRate, c.CloneSourceRate} {
		if r > 0 {
			per = min(per, float64(r))
		}
	}
	return max(int64(per/float64(c.CloneStreams)/4), 4096)
}

// cloneNetwork is the limit's inputs with survivors chunkservers alive,
// every one a possible source.
func (c RecoveryConfig) cloneNetwork(survivors int) CloneNetwork {
	return c.cloneNetworkFrom(survivors, 0)
}

// cloneNetworkFrom is cloneNetwork with sources of them holding the
// chunks to clone.
func (c RecoveryConfig) cloneNetworkFrom(survivors, sources int) CloneNetwork {
	return CloneNetwork{NIC: c.Testbed.NIC, CloneRate: float64(c.CloneRate), SourceRate: float64(c.CloneSourceRate), Survivors: survivors, Sources: sources,
		MaxClones: c.MaxClones}
}
