package master

import (
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/placement"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Config configures a master.
type Config struct {
	Dir                string           // data directory: lock file, Raft log and snapshots
	ChunkSize          int64            // used when the directory is new; later the logged size wins
	DefaultReplication int              // used when the directory is new
	LeaseDuration      time.Duration    // how long a primary's lease lasts unless extended
	HeartbeatInterval  time.Duration    // told to chunkservers at registration
	DeadAfter          time.Duration    // a chunkserver silent this long is dead
	RPCTimeout         time.Duration    // deadline of each call to a chunkserver
	Placement          placement.Config // its MinFree is the reserve: a server with less free space gets no new replica
	// MinReplicas is the fewest replicas a write may be acknowledged with
	// when fewer than a file's replication can take it (capped by the
	// file's replication): a new chunk placed on fewer servers, or an
	// existing chunk with fewer live replicas, refuses writes
	// (KindNoSpace, KindUnavailable) until it is healed.
	MinReplicas int
	// SafeModeThreshold is the fraction of the known chunks that must have
	// a live replica reported before the master leaves safe mode after a
	// start; SafeModeMinServers the live chunkservers it also needs (0:
	// MinReplicas, at most DefaultReplication).
	SafeModeThreshold  float64
	SafeModeMinServers int
	// MaxClonesPerServer bounds the re-replications in flight that one
	// chunkserver takes part in as source and, apart, as target (a clone
	// uses the source's outgoing and the target's incoming bandwidth);
	// chunkservers also cap their clone bandwidth themselves.
	MaxClonesPerServer int
	// MinCloneRate is the slowest transfer, in bytes a second, a clone's
	// deadline allows for: RPCTimeout plus the chunk's length at this
	// rate. It must not exceed what a target's clone throttle gives each
	// of its clone streams over the network it is on (chunkserver
	// --clone-rate / --clone-streams), or throttled clones miss their
	// deadline and are started again and again.
	MinCloneRate int64
	// RepairInterval is how often the master plans re-replication and
	// trimming.
	RepairInterval time.Duration
	// Balance runs the rebalancer from the start (admin balance starts
	// and stops it later): it moves replicas, at lower priority than
	// repair and within the clone throttle, until every live server's
	// utilisation is within BalanceThreshold percentage points of the
	// mean, with at most BalanceMaxMoves moves in flight.
	Balance          bool
	BalanceThreshold float64
	BalanceMaxMoves  int

	// SuperuserGroup is the group whose members, with UID 0, are the
	// superuser: they pass every permission check and may make the admin
	// calls (HAChange, Balance, Decommission). Unless Security is
	// insecure, every call must come with a verified certificate, whose
	// identity is whom it acts as (authz.go).
	SuperuserGroup uint32
	// OnClone, when set, is told of each clone started and ended (tests and
	// benchmarks), in the order the master decided them: it is called with
	// the master's replica registry locked, and must neither block nor
	// call the master.
	OnClone           func(CloneEvent)
	SnapshotThreshold uint64 // log entries between checkpoints
	NoSync            bool   // skip fsync of the log (tests of the CPU path only)
	Addr              string // address reported by ClusterInfo; Serve fills it from the listener when empty

	// A highly available group of masters (ha.go). NodeID names this
	// master; Members are the group's initial voters, this one among them
	// unless it is an Observer, each at the address clients use, which
	// also carries Raft: RaftListener is that port's Raft side
	// (rpc.Mux.Raft). Empty Members: a master alone.
	NodeID       string
	Members      []Member
	Observer     bool
	RaftListener net.Listener
	// ReadWait bounds how long a read waits for this master to apply the
	// state ID a client has seen before it is refused as too far behind
	// (the client then asks another master).
	ReadWait time.Duration
	// QueueStatsFile, when set, receives the summary of the calls' RPC
	// queue times (QueueStats, JSON) when the master closes (queue.go).
	QueueStatsFile string
	// NoLeaseAdoption makes a new leader (or a restarted master) wait out
	// every lease its predecessor may have granted, as GFS does, instead
	// of adopting the leases chunkservers report (registry_leases.go).
	// LeaseReportAge bounds how old such a report may be when it arrives
	// (built, sent, queued); a lease is adopted only if it surely holds
	// allowing for that and for clock rates.
	NoLeaseAdoption bool
	LeaseReportAge  time.Duration

	// Security secures every connection the master serves or opens
	// (clients, chunkservers, the other masters' Raft): mutual TLS, or
	// plain TCP when nil or rpc.Insecure(). Serve expects a listener of a
	// Mux made with the same Security, or a bare one, whose connections the
	// gRPC server then handshakes itself.
	Security *rpc.Security
	// Chunk access tokens (tokens.go): locations carry tokens, the leader
	// makes and rotates the keys, chunkservers get them with heartbeats.
	// They are always on when Security is mutual TLS; Tokens turns them on
	// over plain TCP too (tests), as chunkservers' RequireTokens does.
	// TokenKeyPeriod is how long each key signs, TokenLifetime how long a
	// token is valid.
	Tokens         bool
	TokenKeyPeriod time.Duration
	TokenLifetime  time.Duration
	// TokenClock, when set, is the clock of token keys and tokens alone
	// (tests advance it past rotations); nil: Clock.
	TokenClock clock.Clock

	// OnCall, when set, is told of every gRPC call the master answers
	// (metrics). It must not block.
	OnCall rpc.CallObserver

	// TrashPeriod is the grace period of deleted files (trash.go): a
	// delete moves them to the trash, from which they can be undeleted
	// until it passes; then the master purges them and their chunks. 0
	// deletes at once. The leader logs it, so every master of a group
	// keeps the same; TrashInterval is how often the leader looks for
	// entries to purge.
	TrashPeriod   time.Duration
	TrashInterval time.Duration

	Clock  clock.Clock
	Logger *slog.Logger
}

// DefaultTrashPeriod is GFS's grace period for deleted files: three days.
const DefaultTrashPeriod = 72 * time.Hour

// Token defaults. A key signs for 10 h, as HDFS's
// dfs.block.access.key.update.interval; a token lives 1 h, not HDFS's
// 10 h: a client refreshes an expired token transparently (one more
// GetChunks per file an hour), and a token that leaks is good for an
// hour, not a working day.
const (
	DefaultTokenKeyPeriod = 10 * time.Hour
	DefaultTokenLifetime  = time.Hour
)

// CloneEvent reports a clone started (Done false) or ended.
type CloneEvent struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Live    int // live replicas of the chunk when the clone was planned
	Source  string
	Target  string
	Done    bool
	Err     error // for an ended clone: nil when the replica counts
	// Move marks a balancer move: once its clone counts, the source's
	// replica is trimmed (Trimmed).
	Move    bool
	Trimmed bool
}

// Rebalancer defaults: every server within 10 percentage points of the
// mean utilisation (HDFS's balancer threshold), 4 moves in flight (each
// also bounded by the per-server clone throttle).
const (
	DefaultBalanceThreshold = 10
	DefaultMaxMoves         = 4
)

// DefaultReserve is the default free space (bytes) a chunkserver must keep
// beyond a new replica: 1 GiB.
const DefaultReserve = 1 << 30

// DefaultConfig returns the defaults: 64 MiB chunks, 3 replicas, 60 s
// leases, 3 s heartbeats, dead after 30 s, writes acknowledged with at
// least 2 replicas, safe mode until 99.9 % of chunks are located, 2 clones
// in flight per chunkserver, a 1 GiB reserve, the rebalancer on with a 10
// point threshold and 4 moves in flight, tokens only on a secure cluster
// (keys of 10 h, tokens of 1 h).
func DefaultConfig() Config {
	return Config{
		ChunkSize:          chunkfs.DefaultChunkSize,
		DefaultReplication: chunkfs.DefaultReplication,
		LeaseDuration:      chunkfs.LeaseDuration,
		HeartbeatInterval:  3 * time.Second,
		DeadAfter:          30 * time.Second,
		RPCTimeout:         10 * time.Second,
		Placement:          defaultPlacement(),
		MinReplicas:        2,
		SafeModeThreshold:  0.999,
		MaxClonesPerServer: 2,
		MinCloneRate:       1 << 20,
		RepairInterval:     time.Second,
		Balance:            true,
		BalanceThreshold:   DefaultBalanceThreshold,
		BalanceMaxMoves:    DefaultMaxMoves,
		SnapshotThreshold:  65536,
		NodeID:             "master-1",
		ReadWait:           time.Second,
		TokenKeyPeriod:     DefaultTokenKeyPeriod,
		TokenLifetime:      DefaultTokenLifetime,
		LeaseReportAge:     defaultAdoptAge,
		TrashPeriod:        DefaultTrashPeriod,
		TrashInterval:      time.Minute,
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
	case c.MinReplicas < 1 || c.MinReplicas > chunkfs.MaxReplication:
		return errors.New("master: MinReplicas out of range")
	case !(c.SafeModeThreshold >= 0 && c.SafeModeThreshold <= 1) || c.SafeModeMinServers < 0:
		return errors.New("master: SafeModeThreshold must be in [0, 1], SafeModeMinServers not negative")
	case c.MaxClonesPerServer < 1 || c.RepairInterval <= 0 || c.MinCloneRate <= 0:
		return errors.New("master: MaxClonesPerServer, RepairInterval and MinCloneRate must be positive")
	case !(c.BalanceThreshold > 0 && c.BalanceThreshold < 100) || c.BalanceMaxMoves < 1:
		return errors.New("master: BalanceThreshold must be in (0, 100) percentage points, BalanceMaxMoves positive")
	case c.Clock == nil || c.Logger == nil:
		return errors.New("master: Clock and Logger must be set")
	case c.TrashPeriod < 0 || c.TrashPeriod.Nanoseconds() > namespace.MaxTrashPeriod || c.TrashInterval <= 0:
		return errors.New("master: TrashPeriod must be in [0, 10 years] and TrashInterval positive")
	case c.LeaseReportAge < 0:
		return errors.New("master: LeaseReportAge must not be negative")
	case c.NodeID == "" || c.ReadWait <= 0:
		return errors.New("master: NodeID must be set and ReadWait positive")
	case c.TokenKeyPeriod < time.Second || c.TokenLifetime < time.Second:
		return errors.New("master: TokenKeyPeriod and TokenLifetime must be at least 1s")
	case c.TokenLifetime > 10*c.TokenKeyPeriod:
		return errors.New("master: TokenLifetime must be at most 10 TokenKeyPeriods (chunkservers hold at most 16 keys)")
	}
	return c.Placement.Validate()
}

func defaultPlacement() placement.Config {
	p := placement.DefaultConfig()
	p.MinFree = DefaultReserve
	return p
}

// Member is one master of a group: its node ID and the address clients
// and the other masters reach it on.
type Member struct {
	ID   string
	Addr string
}

// tokensOn reports whether chunk access tokens are on: always on a
// secure cluster, and with Tokens on plain TCP.
func (c Config) tokensOn() bool { return c.Tokens || !c.Security.IsInsecure() }

// grouped reports whether the master is one of a group of several.
func (c Config) grouped() bool { return c.Observer || len(c.Members) > 1 }

// minReplicas is the fewest replicas a write to a file of replication
// repl may be acknowledged with.
func (c Config) minReplicas(repl int) int { return max(min(c.MinReplicas, repl), 1) }

// safeModeServers is the live chunkservers safe mode waits for.
func (c Config) safeModeServers() int {
	if c.SafeModeMinServers > 0 {
		return c.SafeModeMinServers
	}
	return c.minReplicas(c.DefaultReplication)
}
