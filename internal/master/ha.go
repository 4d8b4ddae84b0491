package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/oplog"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Highly available masters (HDFS-12943). The masters of a group share one
// Raft log; the leader is the active master and the others apply the same
// log: voters are hot standbys, observers are non-voting members that serve
// reads. Every master learns chunk locations from the chunkservers, which
// heartbeat to each of them. Only the leader changes anything: a call that
// would (a mutation, a lease, a checksum report, msync) reaching another
// master is refused with "not the leader" naming the leader's address, and
// the client goes there. Reads (stat, list, chunk locations, reports) are
// served by any master once it has applied the state ID the client has
// seen, waiting at most ReadWait, so a client reads its own writes from an
// observer; an observer that knows no location for a chunk refuses the
// read so the client asks the leader (HDFS-13924).
//
// A master that becomes leader first applies every committed entry
// (a barrier), initialises a new namespace if the group is new, and holds
// the leases the previous leader may have granted: the logged lease
// horizon bounds them. Until then it refuses mutations as a follower does.
// During the hold it adopts the leases chunkservers report and it can
// confirm (registry.adopt); every other chunk below the hold's handle
// floor waits for the hold to end.

// leadership is what a master knows of its role; the zero value is a
// master that does not lead.
type leadership struct {
	ready atomic.Bool // this master leads and has caught up: it takes mutations

	mu          sync.Mutex // guards leasePause and handleFloor
	leasePause  time.Time  // no lease on a chunk below handleFloor until then
	handleFloor chunkfs.Handle

	// fresh: this master made the namespace (a new cluster), so no lock
	// session can exist to reclaim. Written and read by the goroutine
	// that makes the master ready.
	fresh bool
}

// leaseHold returns until when leases on chunks below which handle wait
// for the previous leader's to end.
func (l *leadership) leaseHold() (time.Time, chunkfs.Handle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leasePause, l.handleFloor
}

func (l *leadership) setHold(pause time.Time, floor chunkfs.Handle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leasePause, l.handleFloor = pause, floor
}

// holdFromLog computes the lease hold from the applied state: leases the
// previous leader granted end by the logged horizon. It also holds back
// the replicas the log holds back (registry.holdLogged): this master may
// have counted them from reports while it followed. capAt, when not zero,
// also bounds it: a lone master restarting knows its predecessor stopped
// before now, so no lease outlives now plus a lease.
func (m *Master) holdFromLog(capAt time.Time) {
	var pause time.Time
	var floor chunkfs.Handle
	m.state.read(func(ns *namespace.Namespace) {
		pause = time.Unix(0, ns.LeaseHorizon())
		floor = ns.NextHandle()
	})
	if !capAt.IsZero() && pause.After(capAt) {
		pause = capAt
	}
	m.lead.setHold(pause, floor)
	m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		m.reg.setHold(pause, floor)
		m.reg.holdLogged(ns.HeldBackAll(), ns.ChunkVersion, m.cfg.Clock.Now())
	})
}

// adoptReported adopts the leases chunkservers reported before this master
// led, where it can confirm them (registry.adopt).
func (m *Master) adoptReported() int {
	var n int
	m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		n = len(m.reg.adoptAll(ns.ChunkVersion, m.cfg.Clock.Now()))
	})
	return n
}

// onLeadership is the log's leadership callback.
func (m *Master) onLeadership(leader bool) {
	if !leader {
		m.lead.ready.Store(false)
		m.cfg.Logger.Warn("master lost the leadership", "id", m.cfg.NodeID)
		return
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		m.takeOver()
	}()
}

// takeOver makes this new leader ready: caught up, namespace initialised,
// old leases waited out; then it purges the trash entries due. It retries
// until it is ready, loses the leadership again, or the master closes.
func (m *Master) takeOver() {
	for attempt := 0; ; attempt++ {
		select {
		case <-m.stop:
			return
		default:
		}
		if !m.log.IsLeader() {
			return
		}
		err := m.catchUp()
		if err == nil {
			adopted := m.adoptReported()
			m.locks.reset(m.cfg.Clock.Now(), LockSessionTTL, m.lead.fresh)
			m.lead.ready.Store(true)
			m.rotateKeys()
			pause, _ := m.lead.leaseHold()
			m.cfg.Logger.Info("master leads", "id", m.cfg.NodeID, "state_id", m.StateID(), "old_leases_end", pause, "leases_adopted", adopted)
			m.purgeDue() // what fell due while no master led, as a lone master does at its start
			return
		}
		m.cfg.Logger.Warn("new leader not ready yet", "id", m.cfg.NodeID, "err", err)
		select {
		case <-m.stop:
			return
		case <-time.After(min(time.Duration(attempt+1)*50*time.Millisecond, time.Second)):
		}
	}
}

func (m *Master) catchUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.log.Barrier(ctx); err != nil {
		return err
	}
	if err := m.initNamespace(ctx); err != nil {
		return err
	}
	m.holdFromLog(time.Time{})
	return nil
}

// leads reports whether this master takes mutations now.
func (m *Master) leads() bool { return m.lead.ready.Load() }

// notLeader is the refusal of a call only the leader takes.
func (m *Master) notLeader(op string) error {
	_, addr := m.log.LeaderID()
	return &chunkfs.Error{Op: op, Kind: chunkfs.KindNotLeader, Err: &chunkfs.LeaderHint{Leader: addr}}
}

// haStatus is this master's view of its group.
type haStatus struct {
	stateID              uint64
	id, role             string
	applied, commit      uint64 // last applied index; commit index this master knows
	leaderID, leaderAddr string
	members              []oplog.Member
}

// haStatus describes this master's view of the group; a master running
// alone is its own leader and only member.
func (m *Master) haStatus() (haStatus, error) {
	st := haStatus{stateID: uint64(m.StateID()), id: m.cfg.NodeID, role: m.role(),
		applied: m.log.LastApplied(), commit: m.log.CommitIndex()}
	if !m.cfg.grouped() {
		st.leaderID, st.leaderAddr = m.cfg.NodeID, m.advertised()
		st.members = []oplog.Member{{ID: m.cfg.NodeID, Addr: m.advertised(), Voter: true}}
		return st, nil
	}
	st.leaderID, st.leaderAddr = m.log.LeaderID()
	var err error
	st.members, err = m.log.Members()
	return st, err
}

// role names what this master is in its group.
func (m *Master) role() string {
	switch {
	case !m.cfg.grouped():
		return "standalone"
	case m.log.IsLeader():
		return "leader"
	case m.cfg.Observer:
		return "observer"
	}
	return "follower"
}

// advertised is the address this master is reached on.
func (m *Master) advertised() string {
	m.srvMu.Lock()
	defer m.srvMu.Unlock()
	return m.addr
}

// haChange changes the group's membership (op add-voter, add-observer or
// remove the master id at addr) or moves the leadership to id
// (transfer-leader).
func (m *Master) haChange(ctx context.Context, op, id, addr string) error {
	if !m.cfg.grouped() {
		return chunkfs.E("ha "+op, id, chunkfs.KindNotSupported, "this master runs alone (no --cluster)")
	}
	switch op {
	case "add-voter":
		return m.log.AddVoter(ctx, id, addr)
	case "add-observer":
		return m.log.AddObserver(ctx, id, addr)
	case "remove":
		if id == m.cfg.NodeID {
			return chunkfs.E("ha remove", id, chunkfs.KindInvalid, "the leader cannot remove itself; transfer the leadership first")
		}
		return m.log.Remove(ctx, id)
	case "transfer-leader":
		return m.log.TransferLeadership(id)
	}
	return chunkfs.E("ha", op, chunkfs.KindInvalid, "unknown change; want add-voter, add-observer, remove or transfer-leader")
}

// joinLoop has a new observer ask the group's leader to add it, until it
// is a member or the master closes.
func (m *Master) joinLoop() {
	defer m.bg.Done()
	addrs := make([]string, 0, len(m.cfg.Members))
	for _, mb := range m.cfg.Members {
		if mb.ID != m.cfg.NodeID {
			addrs = append(addrs, mb.Addr)
		}
	}
	set, err := rpc.NewMasterSet(m.pool, addrs)
	if err != nil {
		m.cfg.Logger.Error("observer cannot join", "err", err)
		return
	}
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		if m.isMember() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.RPCTimeout)
		err := m.joinCall(ctx, set)
		cancel()
		if err == nil {
			m.cfg.Logger.Info("observer joined the group", "id", m.cfg.NodeID)
			return
		}
		m.cfg.Logger.Warn("observer not yet added to the group", "id", m.cfg.NodeID, "err", err)
		select {
		case <-m.stop:
			return
		case <-time.After(delay):
		}
	}
}

// isMember reports whether the log's configuration holds this master.
func (m *Master) isMember() bool {
	members, err := m.log.Members()
	if err != nil {
		return false
	}
	for _, mb := range members {
		if mb.ID == m.cfg.NodeID {
			return true
		}
	}
	return false
}

// logMembers converts the group's initial voters for the log.
func (c Config) logMembers() []oplog.Member {
	if c.Observer {
		return nil
	}
	out := make([]oplog.Member, len(c.Members))
	for i, mb := range c.Members {
		out[i] = oplog.Member{ID: mb.ID, Addr: mb.Addr, Voter: true}
	}
	return out
}

// checkGroup validates a group's configuration.
func (c Config) checkGroup() error {
	if !c.grouped() {
		return nil
	}
	self := ""
	for _, mb := range c.Members {
		if mb.ID == c.NodeID {
			self = mb.Addr
		}
	}
	switch {
	case c.RaftListener == nil:
		return errors.New("master: a group of masters needs RaftListener")
	case c.Observer && self != "":
		return fmt.Errorf("master: observer %q is named among the voters", c.NodeID)
	case !c.Observer && self == "":
		return fmt.Errorf("master: %q is not among the group's members", c.NodeID)
	case c.Addr == "":
		return fmt.Errorf("master: a master of a group needs its address (Addr)")
	case !c.Observer && self != c.Addr:
		return fmt.Errorf("master: %q listens on %s but the group names it at %s", c.NodeID, c.Addr, self)
	}
	return nil
}

// Leads reports whether this master leads its group and takes mutations
// (a master alone always does once open).
func (m *Master) Leads() bool { return m.leads() }
