package oplog

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/loopback"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// group is a test group of masters' logs on loopback TCP, each with its
// own directory and FSM.
type group struct {
	t       *testing.T
	members []Member
	dirs    map[string]string
	fsms    map[string]*listFSM
	logs    map[string]*Log
	mu      sync.Mutex // guards leads
	leads   map[string][]bool
}

func newGroup(t *testing.T, voters int) *group {
	g := &group{t: t, dirs: map[string]string{}, fsms: map[string]*listFSM{}, logs: map[string]*Log{}, leads: map[string][]bool{}}
	for i := range voters {
		id := fmt.Sprintf("m%d", i+1)
		g.members = append(g.members, Member{ID: id, Addr: freeTCPAddr(t), Voter: true})
		g.dirs[id] = t.TempDir()
	}
	for _, m := range g.members {
		g.start(m.ID, m.Addr, false)
	}
	t.Cleanup(func() {
		for _, l := range g.logs {
			l.Close()
		}
	})
	return g
}

func (g *group) config(id, addr string, observer bool) Config {
	cfg := DefaultConfig(g.dirs[id])
	cfg.NodeID, cfg.BindAddr, cfg.Observer = id, addr, observer
	if !observer {
		cfg.Members = g.members
	}
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.NoSync = true
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.OnLeadership = func(leader bool) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.leads[id] = append(g.leads[id], leader)
	}
	return cfg
}

// start opens node id's log (again, after a stop) on its directory.
func (g *group) start(id, addr string, observer bool) *Log {
	g.t.Helper()
	if g.dirs[id] == "" {
		g.dirs[id] = g.t.TempDir()
	}
	fsm := &listFSM{}
	l, err := Open(context.Background(), g.config(id, addr, observer), fsm)
	if err != nil {
		g.t.Fatalf("open %s: %v", id, err)
	}
	g.fsms[id], g.logs[id] = fsm, l
	return l
}

func (g *group) stop(id string) {
	g.t.Helper()
	if err := g.logs[id].Close(); err != nil {
		g.t.Fatalf("close %s: %v", id, err)
	}
	delete(g.logs, id)
}

// leader waits for one node to lead and returns its ID.
func (g *group) leader() string {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		for id, l := range g.logs {
			if l.IsLeader() {
				return id
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatal("no leader within 30 s")
	return ""
}

// apply logs cmds (each distinct) on the leader, retrying through an
// election. A command whose outcome is unknown (its leader was deposed
// while committing it) is retried only when the new leader has not
// applied it, as a client with request IDs would.
func (g *group) apply(cmds ...string) uint64 {
	g.t.Helper()
	var index uint64
	for _, c := range cmds {
		for attempt := 0; ; attempt++ {
			_, i, err := g.logs[g.leader()].Apply(context.Background(), []byte(c))
			if err == nil {
				index = i
				break
			}
			if attempt > 50 {
				g.t.Fatalf("apply %q: %v", c, err)
			}
			if i, ok := g.appliedOnLeader(c); ok {
				index = i
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return index
}

// appliedOnLeader reports whether the leader, once it has applied every
// committed entry, holds c, and the index it has applied.
func (g *group) appliedOnLeader(c string) (uint64, bool) {
	l := g.logs[g.leader()]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l.Barrier(ctx) != nil {
		return 0, false
	}
	for id, other := range g.logs {
		if other == l {
			return l.LastApplied(), slices.Contains(g.fsms[id].list(), c)
		}
	}
	return 0, false
}

// caughtUp waits until node id has applied index and returns its commands.
func (g *group) caughtUp(id string, index uint64) []string {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.logs[id].WaitApplied(ctx, index); err != nil {
		g.t.Fatalf("%s did not apply %d: %v", id, index, err)
	}
	return g.fsms[id].list()
}

// freeTCPAddr is a loopback address free just now, for a member that
// may be restarted on it (internal/loopback).
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestGroupReplicatesToVotersAndObserver(t *testing.T) {
	g := newGroup(t, 3)
	want := []string{"a", "b", "c"}
	index := g.apply(want...)
	leader := g.leader()
	for _, m := range g.members {
		if got := g.caughtUp(m.ID, index); !slices.Equal(got, want) {
			t.Fatalf("%s applied %q, want %q", m.ID, got, want)
		}
	}
	for _, m := range g.members {
		if m.ID == leader {
			continue
		}
		_, _, err := g.logs[m.ID].Apply(context.Background(), []byte("x"))
		if chunkfs.KindOf(err) != chunkfs.KindNotLeader {
			t.Fatalf("apply on follower %s: %v, want KindNotLeader", m.ID, err)
		}
		if id, _ := g.logs[m.ID].LeaderID(); id != leader {
			t.Fatalf("follower %s names leader %q, want %q", m.ID, id, leader)
		}
	}

	obsAddr := freeTCPAddr(t)
	g.start("o1", obsAddr, true)
	if err := g.logs[leader].AddObserver(context.Background(), "o1", obsAddr); err != nil {
		t.Fatal(err)
	}
	want = append(want, "d")
	index = g.apply("d")
	if got := g.caughtUp("o1", index); !slices.Equal(got, want) {
		t.Fatalf("observer applied %q, want %q", got, want)
	}
	members, err := g.logs[leader].Members()
	if err != nil {
		t.Fatal(err)
	}
	voters := 0
	for _, m := range members {
		if m.Voter {
			voters++
		} else if m.ID != "o1" {
			t.Fatalf("non-voter %q, want only o1", m.ID)
		}
	}
	if len(members) != 4 || voters != 3 {
		t.Fatalf("members %+v, want 3 voters and the observer", members)
	}
	if err := g.logs[leader].AddObserver(context.Background(), g.members[0].ID, g.members[0].Addr); chunkfs.KindOf(err) != chunkfs.KindExist {
		t.Fatalf("demoting a voter to observer: %v, want KindExist", err)
	}
	if g.logs["o1"].IsLeader() {
		t.Fatal("the observer leads")
	}
}

func TestGroupFailoverLosesNothing(t *testing.T) {
	g := newGroup(t, 3)
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint("before-", i))
	}
	g.apply(want...)
	old := g.leader()
	oldAddr := ""
	for _, m := range g.members {
		if m.ID == old {
			oldAddr = m.Addr
		}
	}
	g.stop(old)
	next := g.leader()
	if next == old {
		t.Fatal("the stopped node still leads")
	}
	want = append(want, "after")
	index := g.apply("after")
	if got := g.caughtUp(next, index); !slices.Equal(got, want) {
		t.Fatalf("new leader %s applied %q, want every acknowledged command %q", next, got, want)
	}
	g.start(old, oldAddr, false)
	if got := g.caughtUp(old, index); !slices.Equal(got, want) {
		t.Fatalf("restarted %s applied %q, want %q", old, got, want)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Contains(g.leads[next], true) {
		t.Fatalf("OnLeadership never told %s it leads: %v", next, g.leads[next])
	}
}

func TestGroupTransferAndRemove(t *testing.T) {
	g := newGroup(t, 3)
	g.apply("a")
	leader := g.leader()
	target := g.members[0].ID
	if target == leader {
		target = g.members[1].ID
	}
	if err := g.logs[leader].TransferLeadership(target); err != nil {
		t.Fatal(err)
	}
	if now := g.leader(); now != target {
		t.Fatalf("after transfer to %s, %s leads", target, now)
	}
	if err := g.logs[target].TransferLeadership("nobody"); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("transfer to an unknown node: %v", err)
	}
	if err := g.logs[target].Remove(context.Background(), leader); err != nil {
		t.Fatal(err)
	}
	members, err := g.logs[target].Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || slices.ContainsFunc(members, func(m Member) bool { return m.ID == leader }) {
		t.Fatalf("after removing %s: %+v", leader, members)
	}
	g.apply("b") // two voters still commit
}

func TestWaitAppliedIsBounded(t *testing.T) {
	g := newGroup(t, 3)
	index := g.apply("a")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := g.logs[g.leader()].WaitApplied(ctx, index+1000)
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("waiting for an index far ahead: %v, want KindUnavailable", err)
	}
	if err := g.logs[g.leader()].WaitApplied(context.Background(), index); err != nil {
		t.Fatal(err)
	}
}

func TestGroupConfigValidation(t *testing.T) {
	base := DefaultConfig(t.TempDir())
	base.BindAddr = "127.0.0.1:1"
	cases := map[string]func(*Config){
		"self not a member": func(c *Config) { c.Members = []Member{{ID: "x", Addr: "127.0.0.1:2"}, {ID: "y", Addr: "127.0.0.1:3"}} },
		"duplicate ID": func(c *Config) {
			c.Members = []Member{{ID: c.NodeID, Addr: "127.0.0.1:2"}, {ID: c.NodeID, Addr: "127.0.0.1:3"}}
		},
		"duplicate address": func(c *Config) {
			c.Members = []Member{{ID: c.NodeID, Addr: "127.0.0.1:2"}, {ID: "y", Addr: "127.0.0.1:2"}}
		},
		"member without ID": func(c *Config) { c.Members = []Member{{ID: c.NodeID, Addr: "127.0.0.1:2"}, {Addr: "127.0.0.1:3"}} },
		"group without bind": func(c *Config) {
			c.BindAddr = ""
			c.Members = []Member{{ID: c.NodeID, Addr: "a:1"}, {ID: "y", Addr: "b:1"}}
		},
		"observer no bind": func(c *Config) { c.BindAddr = ""; c.Observer = true },
	}
	for name, mutate := range cases {
		c := base
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate() = nil", name)
		}
	}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, n := range [][2]string{{"", "a:1"}, {"m", ""}, {string(make([]byte, 200)), "a:1"}} {
		if err := checkNode(n[0], n[1]); chunkfs.KindOf(err) != chunkfs.KindInvalid {
			t.Errorf("checkNode(%q, %q) = %v, want KindInvalid", n[0], n[1], err)
		}
	}
}

// A group whose Raft traffic shares each master's one port through
// rpc.Mux, as masters run it.
func TestGroupOverSharedPort(t *testing.T) {
	var members []Member
	var lns []net.Listener
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		members = append(members, Member{ID: fmt.Sprintf("m%d", i+1), Addr: ln.Addr().String(), Voter: true})
	}
	logs := make([]*Log, 3)
	fsms := make([]*listFSM, 3)
	for i, m := range members {
		mux := rpc.NewMux(lns[i], slog.New(slog.DiscardHandler))
		go mux.Serve()
		t.Cleanup(func() { mux.Close() })
		cfg := DefaultConfig(t.TempDir())
		cfg.NodeID, cfg.BindAddr, cfg.Members = m.ID, m.Addr, members
		cfg.Listener, cfg.Dial = mux.Raft(), rpc.DialRaft
		cfg.ElectionTimeout, cfg.NoSync = 300*time.Millisecond, true
		cfg.Logger = slog.New(slog.DiscardHandler)
		fsms[i] = &listFSM{}
		l, err := Open(context.Background(), cfg, fsms[i])
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
		t.Cleanup(func() { l.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := logs[0].WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := logs[slices.IndexFunc(members, func(m Member) bool { return m.ID == id })]
	var index uint64
	for attempt := 0; ; attempt++ {
		_, index, err = leader.Apply(ctx, []byte("shared"))
		if err == nil || attempt > 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range logs {
		if err := l.WaitApplied(ctx, index); err != nil {
			t.Fatalf("%s: %v", members[i].ID, err)
		}
		if got := fsms[i].list(); !slices.Equal(got, []string{"shared"}) {
			t.Fatalf("%s applied %q", members[i].ID, got)
		}
	}
}
