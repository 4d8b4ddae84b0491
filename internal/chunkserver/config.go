package chunkserver

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Config configures a chunkserver.
type Config struct {
	Dirs    []string // data directories; the first also keeps the server ID
	Masters []string // addresses of every master node; heartbeats go to each
	Rack    string   // rack name, for placement
	Addr    string   // address advertised to masters and clients; default: the listener's

	HeartbeatInterval time.Duration // between heartbeats to each master
	ReportSize        int           // chunks listed in each heartbeat (a rotating slice)
	BufferBytes       int64         // bound on pushed data held in memory
	BufferExpiry      time.Duration // pushed data not applied within this is dropped
	ScrubInterval     time.Duration // one idle chunk is verified every interval; 0: never
	RPCTimeout        time.Duration // deadline of calls to masters and peers
	MaxChunkSize      int64         // largest chunk accepted
	CloneStreams      int           // clones this server runs at once as a target; more are refused
	CloneRate         int64         // bytes a second all its clones pull together (0: unlimited)
	CloneSourceRate   int64         // bytes a second the clones it is the source of send together, each paced (0: unlimited)
	// UrgentYieldRate is the bytes a second its other reads, clients'
	// and paced clones', share while it sources an urgent clone (of a
	// chunk it holds the one live replica of), each paced (0: they do not
	// yield): the chunk one failure from loss leaves first.
	UrgentYieldRate int64
	StreamIdle      time.Duration // a data-stream connection sending no request for this long is closed
	Reserve         int64         // bytes each disk keeps free: no new replica (chunk or clone) goes to one with less

	// OnCall, when set, is told of every gRPC call the server answers
	// (metrics). It must not block.
	OnCall rpc.CallObserver
	// Security secures every connection the server serves (gRPC control
	// and the data stream, on one port) and opens (heartbeats, forwarding
	// and clone pulls to other chunkservers): mutual TLS, or plain TCP
	// when nil or rpc.Insecure().
	Security *rpc.Security
	// With tokens required the server refuses every client request
	// without a valid chunk access token for its chunk and access, and
	// node calls from a certificate that is not a node's (tokens.go).
	// They are always required when Security is mutual TLS;
	// RequireTokens requires them over plain TCP too (tests), with the
	// masters' Tokens. TokenClock, when set, is the clock of tokens alone
	// (tests); nil: Clock.
	RequireTokens bool
	TokenClock    clock.Clock

	FS     chunkstore.FS // file system of the data directories
	Clock  clock.Clock
	Logger *slog.Logger

	// OnMutation, when set, is called with every mutation this server
	// applied as primary and all its replicas acknowledged (tests check
	// lease safety from these records). It must not block.
	OnMutation func(Mutation)
}

// Mutation is one mutation a primary applied and had acknowledged by
// every replica: its chunk, version and serial number, from the lease
// check that admitted it (Start) to the acknowledgement (End), by the
// server's clock.
type Mutation struct {
	Handle     chunkfs.Handle
	Version    chunkfs.Version
	Serial     uint64
	Start, End time.Time
}

// Clone throttle defaults: two clones at once, as HDFS's
// dfs.namenode.replication.max-streams, pulling 50 MiB/s together, and
// the clones a server is the source of sending 50 MiB/s together: under
// half of a 1 Gb/s NIC each way, so clients keep most of the bandwidth
// while a dead server's chunks are restored. While a server sources an
// urgent clone, its other reads share 50 MiB/s, leaving the clone more
// than half of such a NIC.
const (
	DefaultCloneStreams    = 2
	DefaultCloneRate       = 50 << 20
	DefaultCloneSourceRate = 50 << 20
	DefaultUrgentYieldRate = 50 << 20
)

// DefaultReserve is the free space each disk keeps: one 64 MiB chunk, so
// a replica created on it can be filled, and a disk that is full refuses
// new replicas (KindNoSpace) rather than accepting chunks it cannot
// store.
const DefaultReserve = 64 << 20

// DefaultConfig returns defaults; Dirs and Masters must still be set.
func DefaultConfig() Config {
	return Config{
		HeartbeatInterval: 3 * time.Second,
		ReportSize:        1000,
		BufferBytes:       512 << 20,
		BufferExpiry:      time.Minute,
		ScrubInterval:     10 * time.Second,
		RPCTimeout:        10 * time.Second,
		MaxChunkSize:      1 << 30,
		CloneStreams:      DefaultCloneStreams,
		CloneRate:         DefaultCloneRate,
		CloneSourceRate:   DefaultCloneSourceRate,
		UrgentYieldRate:   DefaultUrgentYieldRate,
		StreamIdle:        rpc.DefaultStreamIdle,
		Reserve:           DefaultReserve,
		FS:                chunkstore.OS{},
		Clock:             clock.Real{},
		Logger:            slog.Default(),
	}
}

// requireTokens reports whether client requests need tokens: always on a
// secure cluster, and with RequireTokens on plain TCP.
func (c *Config) requireTokens() bool { return c.RequireTokens || !c.Security.IsInsecure() }

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	switch {
	case len(c.Dirs) == 0:
		return errors.New("chunkserver: no data directory")
	case c.HeartbeatInterval <= 0 || c.BufferExpiry <= 0 || c.RPCTimeout <= 0 || c.ScrubInterval < 0 || c.StreamIdle <= 0:
		return errors.New("chunkserver: intervals and timeouts must be positive")
	case c.CloneStreams <= 0 || c.CloneRate < 0 || c.CloneSourceRate < 0 || c.UrgentYieldRate < 0 || c.Reserve < 0:
		return errors.New("chunkserver: clone streams must be positive, clone rates and reserve not negative")
	case c.ReportSize <= 0:
		return errors.New("chunkserver: report size must be positive")
	case c.BufferBytes < rpc.MaxPushSize:
		return fmt.Errorf("chunkserver: buffer of %d bytes cannot hold one push of %d", c.BufferBytes, rpc.MaxPushSize)
	case c.MaxChunkSize < chunkfs.BlockSize || c.MaxChunkSize%chunkfs.BlockSize != 0:
		return fmt.Errorf("chunkserver: max chunk size %d is not a multiple of %d", c.MaxChunkSize, chunkfs.BlockSize)
	case c.FS == nil || c.Clock == nil || c.Logger == nil:
		return errors.New("chunkserver: FS, Clock and Logger must be set")
	case len(c.Addr) > 255:
		return errors.New("chunkserver: advertised address too long")
	}
	return nil
}
