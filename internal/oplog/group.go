package oplog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/hashicorp/raft"
)

// A group of several masters. Every node names the same initial voters
// (Config.Members); each bootstraps the group with that configuration when
// its log is new, as hashicorp/raft allows, and Raft elects a leader among
// them. An observer (Config.Observer) never bootstraps: it starts empty and
// waits for the leader to add it as a non-voter (AddObserver), after which
// it receives the log and applies it like any follower, without a vote.
// Membership changes go through the leader and are themselves log entries.

// Member is one node of the group, as the Raft configuration holds it.
type Member struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"` // Raft transport address
	Voter bool   `json:"voter"`
}

// multiNode reports whether the log runs as one node of a larger group,
// rather than a lone voter that must lead before Open returns.
func (c Config) multiNode() bool {
	return c.Observer || len(c.Members) > 1
}

// initialConfiguration is the configuration a new log bootstraps with:
// the initial voters, or this node alone.
func (l *Log) initialConfiguration(addr raft.ServerAddress) raft.Configuration {
	if len(l.cfg.Members) == 0 {
		return raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(l.cfg.NodeID), Address: addr}}}
	}
	var conf raft.Configuration
	for _, m := range l.cfg.Members {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Addr)})
	}
	return conf
}

// checkMembers validates the initial voters: unique IDs and addresses,
// this node among them.
func checkMembers(c Config) error {
	if len(c.Members) == 0 {
		return nil
	}
	if c.BindAddr == "" {
		return errors.New("oplog: a group of several members needs BindAddr")
	}
	ids, addrs := make(map[string]bool), make(map[string]bool)
	self := false
	for _, m := range c.Members {
		switch {
		case m.ID == "" || m.Addr == "":
			return errors.New("oplog: a member needs an ID and an address")
		case ids[m.ID]:
			return fmt.Errorf("oplog: member ID %q named twice", m.ID)
		case addrs[m.Addr]:
			return fmt.Errorf("oplog: member address %q named twice", m.Addr)
		}
		ids[m.ID], addrs[m.Addr] = true, true
		self = self || m.ID == c.NodeID
	}
	if !self && !c.Observer {
		return fmt.Errorf("oplog: this node %q is not among the members", c.NodeID)
	}
	return nil
}

// appliedWaiter lets readers wait until the FSM has applied an index.
type appliedWaiter struct {
	mu     sync.Mutex    // guards wake
	wake   chan struct{} // closed and replaced whenever the applied index moves
	closed bool
}

func newAppliedWaiter() *appliedWaiter { return &appliedWaiter{wake: make(chan struct{})} }

// moved wakes every waiter.
func (w *appliedWaiter) moved() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		close(w.wake)
		w.wake = make(chan struct{})
	}
}

// shutdown wakes every waiter for good.
func (w *appliedWaiter) shutdown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.wake)
	}
}

func (w *appliedWaiter) channel() (<-chan struct{}, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wake, w.closed
}

// WaitApplied waits until this node has applied index, ctx ends (an
// error of KindUnavailable saying how far behind it is), or the log
// closes. An observer serves a read with a client's state ID once this
// returns.
func (l *Log) WaitApplied(ctx context.Context, index uint64) error {
	for {
		wake, closed := l.waiter.channel()
		if l.applied.Load() >= index {
			return nil
		}
		if closed {
			return errClosed
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return chunkfs.E("wait", "", chunkfs.KindUnavailable,
				fmt.Sprintf("applied %d, behind %d", l.applied.Load(), index))
		}
	}
}

// CommitIndex returns the highest index this node knows to be committed.
// On the leader it is the group's commit index: what msync hands out.
func (l *Log) CommitIndex() uint64 { return l.raft.CommitIndex() }

// LeaderID returns the leader's node ID and Raft address, empty when no
// leader is known.
func (l *Log) LeaderID() (id, addr string) {
	a, i := l.raft.LeaderWithID()
	return string(i), string(a)
}

// WaitLeader waits until a leader is known and returns its ID.
func (l *Log) WaitLeader(ctx context.Context) (string, error) {
	for {
		if id, _ := l.LeaderID(); id != "" {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return "", chunkfs.E("wait", "", chunkfs.KindUnavailable, "no leader elected")
		case <-l.stop:
			return "", errClosed
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Members returns the group's current configuration.
func (l *Log) Members() ([]Member, error) {
	f := l.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, l.translate(err)
	}
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// AddVoter adds (or promotes) node id at Raft address addr as a voter.
// Only the leader may change the membership.
func (l *Log) AddVoter(ctx context.Context, id, addr string) error {
	if err := checkNode(id, addr); err != nil {
		return err
	}
	return l.membership(l.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout(ctx)))
}

// AddObserver adds node id at Raft address addr as a non-voter: it
// receives and applies the log but takes no part in elections or commits.
// A voter cannot be demoted this way; remove it first.
func (l *Log) AddObserver(ctx context.Context, id, addr string) error {
	if err := checkNode(id, addr); err != nil {
		return err
	}
	members, err := l.Members()
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.ID == id && m.Voter {
			return chunkfs.E("add observer", id, chunkfs.KindExist, "is a voter; remove it first")
		}
	}
	return l.membership(l.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout(ctx)))
}

// Remove takes node id out of the group.
func (l *Log) Remove(ctx context.Context, id string) error {
	if id == "" {
		return chunkfs.E("remove", id, chunkfs.KindInvalid, "empty node ID")
	}
	return l.membership(l.raft.RemoveServer(raft.ServerID(id), 0, timeout(ctx)))
}

// TransferLeadership hands the leadership to voter id, or to the most
// up-to-date voter when id is empty.
func (l *Log) TransferLeadership(id string) error {
	if id == "" {
		return l.membership(l.raft.LeadershipTransfer())
	}
	members, err := l.Members()
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.ID == id && m.Voter {
			return l.membership(l.raft.LeadershipTransferToServer(raft.ServerID(m.ID), raft.ServerAddress(m.Addr)))
		}
	}
	return chunkfs.E("transfer leadership", id, chunkfs.KindNotExist, "no such voter")
}

func (l *Log) membership(f raft.Future) error {
	if err := f.Error(); err != nil {
		return l.translate(err)
	}
	return nil
}

// checkNode validates a node named in a membership change.
func checkNode(id, addr string) error {
	switch {
	case id == "" || len(id) > 128:
		return chunkfs.E("membership", id, chunkfs.KindInvalid, "node ID must be 1 to 128 bytes")
	case addr == "" || len(addr) > 256:
		return chunkfs.E("membership", id, chunkfs.KindInvalid, "node address must be 1 to 256 bytes")
	}
	return nil
}

// watchLeadership forwards Raft's leadership changes to Config.OnLeadership
// until Raft has shut down (Raft blocks on a full channel, so it is read
// until then).
func (l *Log) watchLeadership(ch <-chan bool) {
	defer close(l.watchDone)
	for {
		select {
		case leader := <-ch:
			if l.cfg.OnLeadership != nil {
				l.cfg.OnLeadership(leader)
			}
		case <-l.raftDown:
			return
		}
	}
}

// streamLayer carries Raft over connections another layer accepts and
// dials (a master's shared port).
type streamLayer struct {
	net.Listener
	dial func(addr string, timeout time.Duration) (net.Conn, error)
	addr string
}

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dial(string(addr), timeout)
}

// Addr is this node's advertised address, not the shared listener's.
func (s *streamLayer) Addr() net.Addr { return raftAddr(s.addr) }

type raftAddr string

func (a raftAddr) Network() string { return "tcp" }
func (a raftAddr) String() string  { return string(a) }
