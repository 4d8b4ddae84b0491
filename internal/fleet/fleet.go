// Package fleet runs many simulated chunkservers in one process, for
// measuring a real master at the scale of a real cluster. Each simulated
// server speaks the chunkserver's side of the control protocol to the
// master over real sockets: it registers with a full chunk report,
// heartbeats on the chunkserver's schedule with a rotating sample of its
// chunks and the leases it holds, re-registers when told to, deletes what
// it is told is garbage or stale, and serves the master's calls of the
// ChunkServer service (Lease, Truncate, ChunkInfo, DeleteChunks, Clone) on
// a listener of its own.
//
// A simulated server holds no chunk data: only each replica's handle,
// version and length, and the leases granted to it. Calls that move data
// (Write, Append, Reserve, Apply, Sync) are refused with KindNotSupported;
// a Clone records the replica at the version and length the master names
// without pulling any bytes. The lengths a client's writes would have
// given the replicas are set with Wrote.
//
// A Fleet is plain TCP on loopback: its servers check no certificates
// and send no tokens. Servers may share a connection to the master
// (Config.ServersPerConn) so that a process of 10,000 simulated servers
// stays within its file-descriptor limit; each still has its own listener.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Config configures a fleet.
type Config struct {
	Master            string        // host:port of the master every server reports to
	Servers           int           // how many simulated chunkservers
	IDPrefix          string        // server i's ID is IDPrefix + i
	Capacity          int64         // bytes of disk each server reports
	HeartbeatInterval time.Duration // between heartbeats, as the chunkserver's
	ReportSize        int           // chunks listed in each heartbeat's sample, as the chunkserver's
	RPCTimeout        time.Duration // deadline of each call to the master
	// ServersPerConn is how many servers share one connection to the
	// master (1: one each, as real chunkservers).
	ServersPerConn int
	// OnRegister, when set, is told of each registration the master
	// accepted, with the server's index and the chunks it reported. It
	// must not block.
	OnRegister func(server, chunks int)
	Clock      clock.Clock
	Logger     *slog.Logger
}

// DefaultConfig returns the chunkserver's defaults: heartbeats every 3 s
// with a sample of 1,000 chunks, 10 s calls, one connection per server,
// 1 TiB disks.
func DefaultConfig() Config {
	return Config{
		IDPrefix:          "sim-",
		Capacity:          1 << 40,
		HeartbeatInterval: 3 * time.Second,
		ReportSize:        1000,
		RPCTimeout:        10 * time.Second,
		ServersPerConn:    1,
		Clock:             clock.Real{},
		Logger:            slog.Default(),
	}
}

// MaxServers bounds a fleet: the master's own limit on chunkservers.
const MaxServers = 10000

// Validate reports the first configuration error.
func (c Config) Validate() error {
	switch {
	case c.Master == "":
		return errors.New("fleet: Master address is empty")
	case c.Servers < 1 || c.Servers > MaxServers:
		return fmt.Errorf("fleet: Servers must be in [1, %d]", MaxServers)
	case c.Capacity <= 0:
		return errors.New("fleet: Capacity must be positive")
	case c.HeartbeatInterval <= 0 || c.RPCTimeout <= 0:
		return errors.New("fleet: HeartbeatInterval and RPCTimeout must be positive")
	case c.ReportSize < 1:
		return errors.New("fleet: ReportSize must be positive")
	case c.ServersPerConn < 1:
		return errors.New("fleet: ServersPerConn must be positive")
	case c.Clock == nil || c.Logger == nil:
		return errors.New("fleet: Clock and Logger must be set")
	}
	return nil
}

// Replica is one replica a simulated server holds.
type Replica struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Length  int64
}

// Fleet is a set of simulated chunkservers. Make it with New, give
// servers replicas with Hold if they start with some, run it with Start,
// stop it with Close.
type Fleet struct {
	cfg     Config
	servers []*server
	byAddr  map[string]*server // fixed after New
	pools   []*rpc.Pool        // connections to the master, ServersPerConn servers each

	beats   atomic.Int64 // heartbeats answered
	regs    atomic.Int64 // registrations accepted
	failed  atomic.Int64 // calls to the master that failed
	started atomic.Bool
	paused  atomic.Bool // servers skip their heartbeats (Pause)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // servers' report loops and listeners
}

// New opens a listener on loopback for each server and serves the
// ChunkServer service there; the servers report nothing until Start.
func New(cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{cfg: cfg, byAddr: make(map[string]*server, cfg.Servers), ctx: ctx, cancel: cancel}
	for i := 0; i < cfg.Servers; i += cfg.ServersPerConn {
		f.pools = append(f.pools, rpc.NewPool())
	}
	for i := range cfg.Servers {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("fleet: listen for server %d: %v", i, err)
		}
		s := newServer(f, i, lis)
		f.servers = append(f.servers, s)
		f.byAddr[s.addr] = s
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			s.srv.Serve(lis)
		}()
	}
	return f, nil
}

// Len returns the number of servers.
func (f *Fleet) Len() int { return len(f.servers) }

// Addr returns server i's address.
func (f *Fleet) Addr(i int) string { return f.servers[i].addr }

// ID returns server i's ID.
func (f *Fleet) ID(i int) string { return f.servers[i].id }

// Hold gives server i the replicas reps before Start, as if it had
// restarted holding them; it fails once the fleet has started.
func (f *Fleet) Hold(i int, reps []Replica) error {
	if f.started.Load() {
		return errors.New("fleet: Hold after Start")
	}
	if i < 0 || i >= len(f.servers) {
		return fmt.Errorf("fleet: no server %d", i)
	}
	f.servers[i].hold(reps)
	return nil
}

// Start starts every server's reports: server i first registers
// i/Servers of a heartbeat interval from now, so that the fleet's
// heartbeats are spread over the interval as those of servers started at
// different times.
func (f *Fleet) Start() {
	if f.started.Swap(true) {
		return
	}
	n := len(f.servers)
	for i, s := range f.servers {
		phase := time.Duration(int64(f.cfg.HeartbeatInterval) * int64(i) / int64(n))
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			s.reportLoop(f.ctx, phase)
		}()
	}
}

// Wrote records that a client's writes made chunk h length bytes long on
// the replicas at addrs (the master's answer to PrepareWrite names them).
// An address not of this fleet or a replica not held is an error.
func (f *Fleet) Wrote(addrs []string, h chunkfs.Handle, length int64) error {
	for _, a := range addrs {
		s, ok := f.byAddr[a]
		if !ok {
			return fmt.Errorf("fleet: %s is not a simulated server", a)
		}
		if err := s.wrote(h, length); err != nil {
			return err
		}
	}
	return nil
}

// Replicas returns server i's replicas in handle order.
func (f *Fleet) Replicas(i int) []Replica { return f.servers[i].list() }

// Stats is what the fleet has done since New.
type Stats struct {
	Heartbeats    int64 // heartbeats the master answered
	Registrations int64 // registrations the master accepted
	Failed        int64 // calls to the master that failed
	Replicas      int64 // replicas held now
}

// Pause has the servers skip their heartbeats (on) or resume them: a
// window with no heartbeat load, as the reference for a measurement under
// it. The master declares a server dead when a pause outlasts its
// dead-after; a server it asks to register again does so at its next
// heartbeat after the pause.
func (f *Fleet) Pause(on bool) { f.paused.Store(on) }

// Stats returns the fleet's counts now.
func (f *Fleet) Stats() Stats {
	st := Stats{Heartbeats: f.beats.Load(), Registrations: f.regs.Load(), Failed: f.failed.Load()}
	for _, s := range f.servers {
		st.Replicas += int64(s.count())
	}
	return st
}

// Close stops the reports and the servers and closes the connections.
func (f *Fleet) Close() error {
	f.cancel()
	for _, s := range f.servers {
		s.srv.Stop()
	}
	f.wg.Wait()
	var err error
	for _, p := range f.pools {
		err = errors.Join(err, p.Close())
	}
	return err
}

// pool returns the connection pool server i uses.
func (f *Fleet) pool(i int) *rpc.Pool { return f.pools[i/f.cfg.ServersPerConn] }
