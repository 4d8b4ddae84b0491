// Package oplog is the master's operation log: a Raft group (hashicorp/raft)
// with a write-ahead log store (store.go) and a file snapshot store in the master's data
// directory. It is the only package that imports the Raft library.
//
// A single master is a one-voter group; a group of masters (group.go) has
// 3 or 5 voters and any number of non-voting observers, with Raft carried
// on the master's client port. A Log is opened with Open and driven by one
// FSM: Apply (or ApplyAll) hands commands to Raft and returns once they
// are committed and applied, with the index of the entry that holds them;
// concurrent Applies share one Raft entry and one fsync (group commit,
// batch.go). Committed entries reach the FSM in log order on one
// goroutine, each entry's commands as one step when the FSM is an
// EntryFSM. Checkpoints are Raft snapshots written by the FSM in its own
// format; a restart restores the newest snapshot and replays the log tail
// before Open returns.
package oplog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// FSM is the state machine the log drives. Apply and Snapshot are called
// from one goroutine, in log order; Restore replaces the whole state.
type FSM interface {
	// Apply applies the command logged at index and returns its result,
	// which Log.Apply hands back to the caller that logged it.
	Apply(index uint64, cmd []byte) any
	// Snapshot writes the whole state, as of the last applied index, to w.
	// It must not change the state.
	Snapshot(w io.Writer) error
	// Restore replaces the state with one written by Snapshot, as of index.
	Restore(index uint64, r io.Reader) error
}

// FreezingFSM is an FSM whose checkpoint does not stall applies: Freeze,
// called between applies, captures the state as of the last applied index
// in a moment, and the log writes it later (write, once) while applies go
// on; release ends the capture, written or not. The log calls Freeze, not
// Snapshot, when the FSM has it.
type FreezingFSM interface {
	FSM
	Freeze() (write func(io.Writer) error, release func(), err error)
}

// EntryFSM is an FSM that applies the commands of one log entry together.
// Concurrent commands share an entry (group commit) and so its index; an
// FSM that reports its applied index to readers (a state ID) must not let
// a reader see that index with only some of the entry's commands applied,
// or a read at the index a writer was told can miss that write. The log
// calls ApplyEntry, not Apply, when the FSM has it.
type EntryFSM interface {
	FSM
	// ApplyEntry applies cmds, all logged at index, as one step, and
	// returns one result per command.
	ApplyEntry(index uint64, cmds [][]byte) []any
}

// Config configures a log.
type Config struct {
	Dir    string // data directory; holds wal/ and snapshots/
	NodeID string // this node's ID in the Raft group
	// BindAddr is the Raft transport address for a multi-node group; empty
	// runs a single node on an in-process transport.
	BindAddr string
	// AdvertiseAddr is the Raft address other nodes reach this one on, when
	// it differs from BindAddr (a wildcard bind address, or Listener's).
	AdvertiseAddr string
	// Listener and Dial, when set, carry Raft instead of a port of its
	// own: Listener accepts other nodes' connections (a master's port,
	// shared through rpc.Mux) and Dial opens them (rpc.DialRaft). BindAddr
	// is then only this node's address.
	Listener net.Listener
	Dial     func(addr string, timeout time.Duration) (net.Conn, error)
	// Members are the initial voters of a new group, this node among them;
	// every initial voter is started with the same list. Empty: a group of
	// this node alone. Ignored once the log exists (the configuration is
	// then in the log).
	Members []Member
	// Observer starts this node empty, as a non-voter that waits for the
	// leader to add it (Log.AddObserver).
	Observer bool
	// OnLeadership, if set, is called on its own goroutine, in order,
	// whenever this node gains (true) or loses (false) the leadership.
	OnLeadership      func(leader bool)
	MaxBatch          int           // entries per fsync batch (≤ 1024)
	SnapshotThreshold uint64        // log entries between snapshots
	SnapshotInterval  time.Duration // how often to check the threshold
	TrailingLogs      uint64        // entries kept after a snapshot
	RetainSnapshots   int
	ElectionTimeout   time.Duration
	ApplyTimeout      time.Duration // how long a batch may wait to enter Raft
	NoSync            bool          // skip fsync: tests and benchmarks of the CPU path only
	Logger            *slog.Logger
}

// DefaultConfig returns a single-node configuration for dir.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:               dir,
		NodeID:            "master-1",
		MaxBatch:          1024,
		SnapshotThreshold: 65536,
		SnapshotInterval:  30 * time.Second,
		TrailingLogs:      10240,
		RetainSnapshots:   2,
		ElectionTimeout:   100 * time.Millisecond,
		ApplyTimeout:      10 * time.Second,
		Logger:            slog.Default(),
	}
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("oplog: Dir is empty")
	case c.NodeID == "":
		return errors.New("oplog: NodeID is empty")
	case c.MaxBatch < 1 || c.MaxBatch > 1024:
		return errors.New("oplog: MaxBatch must be in [1, 1024]")
	case c.SnapshotThreshold < 1 || c.SnapshotInterval < 5*time.Millisecond:
		return errors.New("oplog: snapshot threshold and interval must be positive")
	case c.RetainSnapshots < 1:
		return errors.New("oplog: RetainSnapshots must be at least 1")
	case c.ElectionTimeout < 10*time.Millisecond:
		return errors.New("oplog: ElectionTimeout must be at least 10ms")
	case c.ApplyTimeout <= 0:
		return errors.New("oplog: ApplyTimeout must be positive")
	case c.Logger == nil:
		return errors.New("oplog: Logger is nil")
	case c.Observer && c.BindAddr == "":
		return errors.New("oplog: an observer needs BindAddr")
	case (c.Listener == nil) != (c.Dial == nil):
		return errors.New("oplog: Listener and Dial go together")
	case c.Listener != nil && c.BindAddr == "" && c.AdvertiseAddr == "":
		return errors.New("oplog: a shared Listener needs this node's address (BindAddr)")
	}
	return checkMembers(c)
}

// Log is an open operation log.
type Log struct {
	cfg     Config
	raft    *raft.Raft
	store   logStore
	fsm     *fsmAdapter
	applied atomic.Uint64
	waiter  *appliedWaiter // wakes WaitApplied when applied moves

	raftDown  chan struct{} // closed once Raft has shut down
	watchDone chan struct{} // closed when watchLeadership returns

	pending   chan *request // commands waiting for a batch
	stop      chan struct{} // closed by Close
	loopDone  chan struct{} // closed when batchLoop returns
	closed    chan struct{} // closed when Close has finished
	inflight  sync.WaitGroup
	closeOnce sync.Once
}

// Open opens (or creates) the log in cfg.Dir and restores the newest
// snapshot. A lone voter then waits until it leads and has replayed the log
// tail into fsm before Open returns; a node of a larger group (or an
// observer) returns at once and catches up as the leader sends it the log
// (WaitLeader, WaitApplied).
func Open(ctx context.Context, cfg Config, fsm FSM) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Log{cfg: cfg, pending: make(chan *request, pendingCapacity), stop: make(chan struct{}), loopDone: make(chan struct{}),
		closed: make(chan struct{}), waiter: newAppliedWaiter(), raftDown: make(chan struct{}), watchDone: make(chan struct{})}
	l.fsm = &fsmAdapter{fsm: fsm, applied: &l.applied, moved: l.waiter.moved}
	notify := make(chan bool, 16)
	if err := l.open(notify); err != nil {
		return nil, err
	}
	go l.batchLoop()
	go l.watchLeadership(notify)
	if cfg.multiNode() {
		return l, nil
	}
	if err := l.waitReady(ctx); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Log) open(notify chan bool) error {
	cfg := l.cfg
	out := &slogWriter{log: cfg.Logger}
	store, err := openStore(cfg.Dir, cfg.NoSync, cfg.Logger, out)
	if err != nil {
		return err
	}
	l.store = store
	snaps, err := raft.NewFileSnapshotStore(cfg.Dir, cfg.RetainSnapshots, out)
	if err != nil {
		store.Close()
		return fmt.Errorf("oplog: open snapshot store: %w", err)
	}
	addr, trans, err := l.transport(out)
	if err != nil {
		store.Close()
		return err
	}
	rc := l.raftConfig(out)
	rc.NotifyCh = notify
	if err := l.bootstrap(rc, store, snaps, trans, addr); err != nil {
		store.Close()
		return err
	}
	r, err := raft.NewRaft(rc, l.fsm, store, store, snaps, trans)
	if err != nil {
		store.Close()
		return fmt.Errorf("oplog: start raft: %w", err)
	}
	l.raft = r
	return nil
}

func (l *Log) transport(out io.Writer) (raft.ServerAddress, raft.Transport, error) {
	if l.cfg.Listener != nil {
		addr := l.cfg.AdvertiseAddr
		if addr == "" {
			addr = l.cfg.BindAddr
		}
		t := raft.NewNetworkTransport(&streamLayer{Listener: l.cfg.Listener, dial: l.cfg.Dial, addr: addr}, 3, 10*time.Second, out)
		return raft.ServerAddress(addr), t, nil
	}
	if l.cfg.BindAddr == "" {
		addr, t := raft.NewInmemTransport(raft.ServerAddress(l.cfg.NodeID))
		return addr, t, nil
	}
	var advertise net.Addr
	if a := l.cfg.AdvertiseAddr; a != "" {
		ta, err := net.ResolveTCPAddr("tcp", a)
		if err != nil {
			return "", nil, fmt.Errorf("oplog: advertise address: %w", err)
		}
		advertise = ta
	}
	t, err := raft.NewTCPTransport(l.cfg.BindAddr, advertise, 3, 10*time.Second, out)
	if err != nil {
		return "", nil, fmt.Errorf("oplog: raft transport: %w", err)
	}
	return t.LocalAddr(), t, nil
}

func (l *Log) raftConfig(out io.Writer) *raft.Config {
	cfg := l.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = cfg.MaxBatch
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.HeartbeatTimeout = cfg.ElectionTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.ElectionTimeout / 2
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: out})
	return rc
}

// bootstrap makes a new log the initial configuration: this node alone,
// or the initial voters. An observer starts empty.
func (l *Log) bootstrap(rc *raft.Config, store logStore, snaps raft.SnapshotStore, trans raft.Transport, addr raft.ServerAddress) error {
	exists, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return fmt.Errorf("oplog: read log state: %w", err)
	}
	if exists || l.cfg.Observer {
		return nil
	}
	if err := raft.BootstrapCluster(rc, store, store, snaps, trans, l.initialConfiguration(addr)); err != nil {
		return fmt.Errorf("oplog: bootstrap: %w", err)
	}
	return nil
}

// waitReady waits for leadership, then for every committed entry to be
// applied (a barrier), so that the state is current when Open returns.
func (l *Log) waitReady(ctx context.Context) error {
	for l.raft.State() != raft.Leader {
		select {
		case <-ctx.Done():
			return fmt.Errorf("oplog: no leader: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := l.raft.Barrier(timeout(ctx)).Error(); err != nil {
		return fmt.Errorf("oplog: replay: %w", err)
	}
	return nil
}

func timeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 30 * time.Second
}

// Apply logs cmd, waits until it is committed and applied, and returns the
// FSM's result and the index of the entry that holds it (commands logged
// together share an entry). Errors are *chunkfs.Error: KindNotLeader when
// this node does not lead, KindUnavailable when the log is closed or the
// context ends first (the command may then still be applied).
func (l *Log) Apply(ctx context.Context, cmd []byte) (any, uint64, error) {
	res, index, err := l.submit(ctx, [][]byte{cmd})
	if err != nil {
		return nil, 0, err
	}
	return res[0], index, nil
}

// ApplyAll logs cmds in one Raft entry (one proposal, one fsync, shared
// with whatever else is queued) and returns their results in order and the
// entry's index. It fails as a whole, with KindTooLarge, when cmds are more
// than MaxEntryCommands or MaxEntryBytes, and otherwise as Apply does.
func (l *Log) ApplyAll(ctx context.Context, cmds [][]byte) ([]any, uint64, error) {
	return l.submit(ctx, cmds)
}

// translate turns a Raft error into a *chunkfs.Error: KindNotLeader,
// naming the leader's address when one is known (in a group sharing each
// master's port, the address clients use), or KindUnavailable.
func (l *Log) translate(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		_, addr := l.LeaderID()
		if !l.cfg.multiNode() || l.cfg.Listener == nil {
			addr = "" // a Raft address of its own is no client address
		}
		return &chunkfs.Error{Op: "log", Kind: chunkfs.KindNotLeader, Err: &chunkfs.LeaderHint{Leader: addr}}
	default:
		return &chunkfs.Error{Op: "log", Kind: chunkfs.KindUnavailable, Err: err}
	}
}

// Barrier waits until every entry committed before the call is applied
// on this node, which must lead. A new leader calls it before answering
// from its state.
func (l *Log) Barrier(ctx context.Context) error {
	if err := l.raft.Barrier(timeout(ctx)).Error(); err != nil {
		return l.translate(err)
	}
	return nil
}

// VerifyLeader confirms with a quorum that this node still leads.
func (l *Log) VerifyLeader() error {
	if err := l.raft.VerifyLeader().Error(); err != nil {
		return l.translate(err)
	}
	return nil
}

// LastApplied returns the index of the last entry applied to the FSM: the
// master's state ID.
func (l *Log) LastApplied() uint64 { return l.applied.Load() }

// LastIndex returns the index of the last entry in the log, applied or not.
func (l *Log) LastIndex() uint64 { return l.raft.LastIndex() }

// IsLeader reports whether this node leads the group.
func (l *Log) IsLeader() bool { return l.raft.State() == raft.Leader }

// Leader returns the leader's Raft address, empty when unknown.
func (l *Log) Leader() string {
	addr, _ := l.raft.LeaderWithID()
	return string(addr)
}

// Snapshot takes a checkpoint now.
func (l *Log) Snapshot() error {
	if err := l.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("oplog: snapshot: %w", err)
	}
	return nil
}

// Close waits for batches already in Raft, stops Raft and closes the log
// store. Commands still queued fail with KindUnavailable.
func (l *Log) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.stop)
		<-l.loopDone
		l.inflight.Wait()
		l.failPending()
		err = l.raft.Shutdown().Error()
		close(l.raftDown)
		<-l.watchDone
		l.waiter.shutdown()
		if cerr := l.store.Close(); err == nil {
			err = cerr
		}
		l.failPending()
		close(l.closed)
	})
	return err
}

func (l *Log) failPending() {
	for {
		select {
		case r := <-l.pending:
			r.done <- response{err: errClosed}
		default:
			return
		}
	}
}

// Exists reports whether dir holds a log (or an old one, moved at Open).
func Exists(dir string) bool {
	for _, name := range []string{walDirName, boltName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
