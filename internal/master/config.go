package master

import (
	"errors"
	"log/slog"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// Config configures a master.
type Config struct {
	Dir                string        // data directory: lock file, Raft log and snapshots
	ChunkSize          int64         // used when the directory is new; later the logged size wins
	DefaultReplication int           // used when the directory is new
	LeaseDuration      time.Duration // how long a primary's lease lasts unless extended
	HeartbeatInterval  time.Duration // told to chunkservers at registration
	DeadAfter          time.Duration // a chunkserver silent this long is dead
	RPCTimeout         time.Duration // deadline of each call to a chunkserver
	Placement          placement.Config
	SnapshotThreshold  uint64 // log entries between checkpoints
	NoSync             bool   // skip fsync of the log (tests of the CPU path only)
	Addr               string // address reported by ClusterInfo; Serve fills it from the listener when empty
	Clock              clock.Clock
	Logger             *slog.Logger
}

// DefaultConfig returns the defaults: 64 MiB chunks, 3 replicas, 60 s
// leases, 3 s heartbeats, dead after 30 s.
func DefaultConfig() Config {
	return Config{
		ChunkSize:          chunkfs.DefaultChunkSize,
		DefaultReplication: chunkfs.DefaultReplication,
		LeaseDuration:      chunkfs.LeaseDuration,
		HeartbeatInterval:  3 * time.Second,
		DeadAfter:          30 * time.Second,
		RPCTimeout:         10 * time.Second,
		Placement:          placement.DefaultConfig(),
		SnapshotThreshold:  65536,
		Clock:              clock.Real{},
		Logger:             slog.Default(),
	}
}

// Validate reports the first configuration error.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("master: Dir is empty")
	case c.ChunkSize < 1024 || c.ChunkSize > 1<<32:
		return errors.New("master: ChunkSize must be in [1 KiB, 4 GiB]")
	case c.DefaultReplication < 1 || c.DefaultReplication > chunkfs.MaxReplication:
		return errors.New("master: DefaultReplication out of range")
	case c.LeaseDuration < 10*time.Millisecond:
		return errors.New("master: LeaseDuration must be at least 10ms")
	case c.HeartbeatInterval <= 0 || c.DeadAfter <= c.HeartbeatInterval:
		return errors.New("master: DeadAfter must exceed a positive HeartbeatInterval")
	case c.RPCTimeout <= 0:
		return errors.New("master: RPCTimeout must be positive")
	case c.SnapshotThreshold < 1:
		return errors.New("master: SnapshotThreshold must be positive")
	case c.Clock == nil || c.Logger == nil:
		return errors.New("master: Clock and Logger must be set")
	}
	return c.Placement.Validate()
}
