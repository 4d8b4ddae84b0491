// Package master is the chunkfs master server: the gRPC service of
// internal/rpc/pb.Master over the replicated namespace (internal/namespace
// driven by internal/oplog), with the in-memory parts that are never
// logged: the chunkserver registry and chunk locations (rebuilt from
// chunkserver reports), leases, and the garbage each chunkserver is told to
// delete. It owns the goroutines, the clock and the data directory; the
// policies it applies (namespace, placement) are pure packages. Its RPC
// edge, the *_rpc.go files (service), turns each request into domain
// values and each answer back; no other file sees a wire type.
//
// Every mutation goes through the log before it is answered; reads take the
// namespace's read lock and never wait for the log. Every response carries
// the state ID: the index of the last applied log entry. The log also
// carries the chunk access token keys, with which any master signs the
// tokens that go with chunk locations (tokens.go).
//
// A Master is made by Open (which replays the log and returns with the
// state current), serves with Serve until Close, and is safe for
// concurrent use. What it knows of chunkservers and replicas (holders,
// versions, leases, fences, clones, garbage) has one owner, the registry
// (registry*.go): pure state whose methods take now and return decisions,
// called under Master.regMu, with every RPC made outside it.
package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/oplog"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// stripes is the number of locks that serialise chunk allocation per file
// and lease grants per chunk.
const stripes = 64

// Master is an open master. Create it with Open, serve it with Serve, stop
// it with Close.
type Master struct {
	cfg   Config
	lock  *os.File
	state *state
	log   *oplog.Log
	pool  *rpc.Pool
	regMu sync.Mutex // guards reg: every call into it
	// beatMu lets one heartbeat at a time into the registry (heartbeat):
	// under thousands of chunkservers the others wait here, holding no
	// lock, rather than queue on regMu ahead of the metadata calls.
	beatMu       sync.Mutex
	beatsWaiting atomic.Int32 // heartbeats waiting for beatMu
	// reportMu lets one registration at a time into the registry
	// (register), as beatMu does heartbeats: a restart's storm of full
	// reports waits here, holding no lock.
	reportMu sync.Mutex
	reg      *registry // chunkservers, replicas, leases, clones: the one owner of that state

	safeMu   sync.Mutex // guards safe, safeWhy and safeLeft
	safe     bool       // in safe mode: no chunk is created (safemode.go)
	safeWhy  string     // what safe mode waits for
	safeLeft time.Time  // when safe mode ended
	started  time.Time  // when Open began: a forced leave logged after it ends start-up safe mode (safemode.go)

	// snapMu is held for writing by a snapshot from its look at the
	// source's leases to its log entry, and for reading by renames and
	// links, so that no file carries a lease into a snapshot's source
	// meanwhile (snapshot_rpc.go).
	snapMu    sync.RWMutex
	allocMu   [stripes]sync.Mutex // serialise chunk allocation per file (by path hash)
	leaseMu   [stripes]sync.Mutex // serialise lease grants per chunk (by handle)
	horizonMu sync.Mutex          // serialises logging the lease horizon
	firsts    firstChunks         // chunks creates allocated, told to no server yet (firstchunk.go)
	keyMu     sync.Mutex          // serialises logging token keys (tokens.go)

	// Whether this master leads, and until when leases given by the
	// previous master (before a restart or a failover) might still be
	// held: no lease on a chunk that existed then is granted before (ha.go).
	lead leadership

	locks   fileLocks // the leader's file locks (locks_rpc.go)
	traffic traffic   // the chunk data chunkservers report serving and receiving (traffic.go)

	srvMu  sync.Mutex // guards srv, addr and closed
	srv    *rpc.Server
	addr   string
	closed bool

	stop chan struct{}  // closed by Close
	bg   sync.WaitGroup // background goroutines

	queue queueHist // the calls' RPC queue times (queue.go)
}

// Open takes the lock on cfg.Dir (creating the directory if needed), opens
// the log, replays it, and initialises a new namespace with cfg's chunk size
// and replication. It refuses, with a one-line reason, a directory it cannot
// read or that another master holds.
func Open(cfg Config) (*Master, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.checkGroup(); err != nil {
		return nil, err
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Logger = reqid.Logger(cfg.Logger) // lines logged with a call's context carry its request ID
	m := &Master{cfg: cfg, lock: lock, state: newState(cfg.TokenLifetime), pool: cfg.Security.NewPool(), stop: make(chan struct{}), addr: cfg.Addr,
		started: cfg.Clock.Now()}
	m.reg = newRegistry(uint64(cfg.Clock.Now().UnixNano()))
	m.reg.configureBalance(cfg.Balance, cfg.BalanceThreshold, cfg.BalanceMaxMoves)
	m.reg.adoption.on, m.reg.adoption.age = !cfg.NoLeaseAdoption, cfg.LeaseReportAge
	m.safe, m.safeWhy = true, "no chunkserver has registered"
	if err := m.openLog(); err != nil {
		m.pool.Close()
		lock.Close()
		return nil, err
	}
	m.bg.Add(3)
	go m.livenessLoop()
	go m.repairLoop()
	go m.trashLoop()
	if cfg.Observer {
		m.bg.Add(1)
		go m.joinLoop()
	}
	if cfg.tokensOn() {
		m.bg.Add(1)
		go m.keyLoop()
	}
	return m, nil
}

// lockDir makes dir if needed, checks it is readable and takes an exclusive
// lock on dir/LOCK.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create data directory %s: %v", dir, err)
	}
	if _, err := os.ReadDir(dir); err != nil {
		return nil, fmt.Errorf("cannot read data directory %s: %v", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file in %s: %v", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another master", dir)
		}
		return nil, fmt.Errorf("cannot lock data directory %s: %v", dir, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}

func (m *Master) openLog() error {
	lc := oplog.DefaultConfig(m.cfg.Dir)
	lc.NodeID = m.cfg.NodeID
	lc.SnapshotThreshold = m.cfg.SnapshotThreshold
	lc.NoSync = m.cfg.NoSync
	lc.Logger = m.cfg.Logger
	if m.cfg.grouped() {
		lc.BindAddr, lc.Members, lc.Observer = m.cfg.Addr, m.cfg.logMembers(), m.cfg.Observer
		lc.Listener, lc.Dial = m.cfg.RaftListener, m.cfg.Security.DialRaft
		lc.ElectionTimeout = groupElectionTimeout
		lc.OnLeadership = m.onLeadership
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := oplog.Open(ctx, lc, m.state)
	if err != nil {
		return err
	}
	m.log = l
	if m.cfg.grouped() {
		return nil // the leader, once elected, catches up and initialises (takeOver)
	}
	if err := m.initNamespace(ctx); err != nil {
		l.Close()
		return err
	}
	// An old lease ends by the logged horizon, and also at most a lease
	// (plus slack) after the previous master stopped, which was before now.
	m.holdFromLog(m.cfg.Clock.Now().Add(m.cfg.LeaseDuration + m.leaseSlack()))
	m.locks.reset(m.cfg.Clock.Now(), LockSessionTTL, m.lead.fresh)
	m.lead.ready.Store(true)
	return nil
}

// groupElectionTimeout is the Raft heartbeat and election timeout of a
// group of masters: long enough that a loaded machine or network does not
// depose a working leader, short enough that a dead one is replaced
// within seconds.
const groupElectionTimeout = time.Second

// initNamespace logs the chunk size and replication of a new namespace,
// and the configured trash period when the namespace has another.
func (m *Master) initNamespace(ctx context.Context) error {
	if err := m.initChunkSize(ctx); err != nil {
		return err
	}
	if err := m.logTrashPeriod(ctx); err != nil {
		return fmt.Errorf("set the trash period: %v", err)
	}
	if err := m.logClusterID(ctx); err != nil {
		return fmt.Errorf("set the cluster ID: %v", err)
	}
	return nil
}

// logClusterID logs a random cluster ID if the namespace has none (a new
// cluster, or one made by an older chunkfs).
func (m *Master) logClusterID(ctx context.Context) error {
	var have string
	m.state.read(func(ns *namespace.Namespace) { have = ns.ClusterID() })
	if have != "" {
		return nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	id := "CID-" + hex.EncodeToString(b[:])
	if _, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpClusterID, Target: id}); err != nil {
		return err
	}
	m.cfg.Logger.Info("cluster ID set", "cluster", id)
	return nil
}

func (m *Master) initChunkSize(ctx context.Context) error {
	var done bool
	var size int64
	m.state.read(func(ns *namespace.Namespace) { done, size = ns.Initialized(), ns.ChunkSize() })
	m.lead.fresh = !done // a new cluster: nobody can hold a lock to reclaim
	if done {
		if size != m.cfg.ChunkSize {
			m.cfg.Logger.Info("chunk size fixed when the namespace was made; ignoring the configured one", "chunk_size", size, "configured", m.cfg.ChunkSize)
		}
		return nil
	}
	_, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpInit, ChunkSize: m.cfg.ChunkSize, Replication: uint32(m.cfg.DefaultReplication)})
	if err != nil {
		return fmt.Errorf("initialise namespace: %v", err)
	}
	return nil
}

// apply stamps c with the time, logs it, and returns its result and the
// state ID after it. A result carrying an error is returned as that error.
func (m *Master) apply(ctx context.Context, c *namespace.Command) (namespace.Result, uint64, error) {
	c.Time = m.cfg.Clock.Now().UnixNano()
	res, index, err := m.log.Apply(ctx, c.Encode(nil))
	if err != nil {
		return namespace.Result{}, 0, err
	}
	r, ok := res.(namespace.Result)
	if !ok {
		return namespace.Result{}, 0, chunkfs.E(c.Op.String(), c.Path, chunkfs.KindOther, "log returned no result")
	}
	return r, index, r.Err
}

// Serve answers RPCs on lis until Close.
func (m *Master) Serve(lis net.Listener) error {
	m.srvMu.Lock()
	if m.closed {
		m.srvMu.Unlock()
		return chunkfs.E("serve", "", chunkfs.KindUnavailable, "master closed")
	}
	if m.srv != nil {
		m.srvMu.Unlock()
		return errors.New("master: Serve called twice")
	}
	m.srv = m.cfg.Security.NewObservedServer(m.cfg.Logger, m.cfg.OnCall, m.queueGuard, m.authGuard, m.leaderGuard)
	m.addService(m.srv)
	if m.addr == "" {
		m.addr = lis.Addr().String()
	}
	srv := m.srv
	m.srvMu.Unlock()
	m.cfg.Logger.Info("master serving", "addr", lis.Addr().String(), "dir", m.cfg.Dir, "state_id", m.StateID())
	err := srv.Serve(lis)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops serving (letting calls in flight finish for a few seconds),
// stops the background work, closes the log and releases the directory.
func (m *Master) Close() error {
	m.srvMu.Lock()
	if m.closed {
		m.srvMu.Unlock()
		return nil
	}
	m.closed = true
	srv := m.srv
	m.srvMu.Unlock()
	if srv != nil {
		gracefulStop(srv, 5*time.Second)
	}
	close(m.stop)
	m.bg.Wait()
	err := errors.Join(m.log.Close(), m.reportQueue())
	m.pool.Close()
	m.lock.Close()
	return err
}

func gracefulStop(srv *rpc.Server, wait time.Duration) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
		srv.Stop()
		<-done
	}
}

// StateID returns the index of the last applied log entry.
func (m *Master) StateID() chunkfs.StateID { return chunkfs.StateID(m.state.stateID()) }

// Snapshot takes a checkpoint of the namespace now.
func (m *Master) Snapshot() error { return m.log.Snapshot() }

// Check runs the namespace consistency checker (for tests and fsck).
func (m *Master) Check() error {
	var err error
	m.state.read(func(ns *namespace.Namespace) { err = ns.Check() })
	return err
}

func pathStripe(p string) int {
	h := fnv.New32a()
	h.Write([]byte(p))
	return int(h.Sum32() % stripes)
}

func handleStripe(h chunkfs.Handle) int { return int(uint64(h) % stripes) }

// readable waits, for a read with a state ID floor, until the master has
// applied that far. The leader refuses an ID beyond its log at once; a
// standby or observer, which may simply lag, waits up to ReadWait and then
// refuses the read as too far behind, so the client asks another master.
func (m *Master) readable(ctx context.Context, op string, minStateID uint64) error {
	if minStateID == 0 || m.state.stateID() >= minStateID {
		return nil
	}
	wait := m.cfg.RPCTimeout
	if !m.leads() {
		wait = m.cfg.ReadWait
	} else if minStateID > m.log.LastIndex() {
		return chunkfs.E(op, "", chunkfs.KindUnavailable, "master has not seen the requested state ID")
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if !m.state.waitApplied(ctx, minStateID) {
		return chunkfs.E(op, "", chunkfs.KindUnavailable,
			fmt.Sprintf("master too far behind: applied %d, the client has seen %d", m.state.stateID(), minStateID))
	}
	return nil
}
