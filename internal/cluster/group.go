package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/chunkfs/chunkfs/internal/master"
)

// A highly available group of masters: Config.Masters voters named m1…mN
// and Config.Observers observers o1…, each on its own port, which carries
// clients, chunkservers and Raft alike (rpc.Mux).

// startGroup opens every master's port first (the group's addresses must
// be known to each), then starts the masters on those listeners: all are
// open at once, so the kernel cannot hand one port out twice, and none is
// closed in between, so no other process can take it.
func (c *Cluster) startGroup() error {
	var lns []net.Listener
	for i := range c.cfg.Masters + c.cfg.Observers {
		n := &node{dir: filepath.Join(c.cfg.Dir, fmt.Sprintf("master%d", i))}
		if i < len(c.cfg.GroupAddrs) {
			n.addr = c.cfg.GroupAddrs[i]
		}
		ln, err := listen(n)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return err
		}
		lns = append(lns, ln)
		c.group = append(c.group, n)
	}
	for i := range c.group {
		if err := c.startGroupMasterOn(i, lns[i]); err != nil {
			for _, l := range lns[i+1:] {
				l.Close()
			}
			c.Close()
			return err
		}
	}
	return nil
}

// groupMember returns master i's node ID and whether it is an observer.
func (c *Cluster) groupMember(i int) (string, bool) {
	if i < c.cfg.Masters {
		return fmt.Sprintf("m%d", i+1), false
	}
	return fmt.Sprintf("o%d", i-c.cfg.Masters+1), true
}

func (c *Cluster) startGroupMaster(i int) error {
	ln, err := listen(c.group[i])
	if err != nil {
		return err
	}
	return c.startGroupMasterOn(i, ln)
}

// startGroupMasterOn starts group master i on ln, its address.
func (c *Cluster) startGroupMasterOn(i int, ln net.Listener) error {
	n := c.group[i]
	id, observer := c.groupMember(i)
	var members []master.Member
	for j := range c.cfg.Masters {
		mid, _ := c.groupMember(j)
		members = append(members, master.Member{ID: mid, Addr: c.group[j].addr})
	}
	mux := c.masterSecurity().NewMux(ln, c.log)
	if n.gate == nil {
		n.gate = newRaftGate()
	}
	raft := gatedListener{mux.Raft(), n.gate}
	go mux.Serve()
	mc := c.masterConfig(n.dir, c.log.With("role", "master", "id", id), func(mc *master.Config) {
		mc.NodeID, mc.Members, mc.Observer, mc.Addr, mc.RaftListener = id, members, observer, n.addr, raft
	})
	m, err := master.Open(mc)
	if err != nil {
		mux.Close()
		return err
	}
	n.m = m
	n.close = func() error {
		err := m.Close()
		mux.Close()
		return err
	}
	n.done = serve(func() error { return m.Serve(mux.GRPC()) })
	return nil
}

// Masters returns the number of masters in the group (1 for a master
// alone).
func (c *Cluster) Masters() int {
	if c.master != nil {
		return 1
	}
	return len(c.group)
}

// Leader returns the index of the group's master that leads and takes
// mutations, or -1 when none does now.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.group {
		if n.close != nil && n.m.Leads() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a master of the group leads and returns its index.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		if i := c.Leader(); i >= 0 {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, errors.New("cluster: no master leads")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StopGroupMaster stops master i of the group, as a crash would.
func (c *Cluster) StopGroupMaster(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return stop(c.group[i])
}

// RestartGroupMaster starts master i of the group again on its address and
// directory, stopping it first if it runs.
func (c *Cluster) RestartGroupMaster(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := stop(c.group[i]); err != nil {
		return err
	}
	return c.startGroupMaster(i)
}

// GroupMasterAddr returns master i's address.
func (c *Cluster) GroupMasterAddr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.group[i].addr
}

// GroupMemberName returns master i's node ID (m1…, then o1… for observers).
func (c *Cluster) GroupMemberName(i int) string {
	id, _ := c.groupMember(i)
	return id
}
