package rpc

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// fakeMaster answers ClusterInfo as a leader (with its state ID), as a
// follower naming a leader, or with a fixed error.
type fakeMaster struct {
	pb.UnimplementedMasterServer
	stateID uint64
	leader  string // when set, refuse as a follower naming this leader
	err     error  // when set, the answer
	calls   atomic.Int64
}

func (f *fakeMaster) ClusterInfo(ctx context.Context, _ *pb.ClusterInfoRequest) (*pb.ClusterInfoResponse, error) {
	f.calls.Add(1)
	switch {
	case f.err != nil:
		return nil, f.err
	case f.leader != "":
		return nil, &chunkfs.Error{Op: "info", Kind: chunkfs.KindNotLeader, Err: &chunkfs.LeaderHint{Leader: f.leader}}
	}
	return &pb.ClusterInfoResponse{StateId: f.stateID}, nil
}

// serveFake serves f on a loopback port and returns its address.
func serveFake(t *testing.T, f *fakeMaster) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(nil)
	pb.RegisterMasterServer(srv, f)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func masterClient(t *testing.T, addrs ...string) (pb.MasterClient, *MasterSet) {
	t.Helper()
	pool := NewPool()
	t.Cleanup(func() { pool.Close() })
	set, err := NewMasterSet(pool, addrs)
	if err != nil {
		t.Fatal(err)
	}
	return pb.NewMasterClient(set), set
}

func TestMasterSetFollowsHintsAndSkipsDeadMasters(t *testing.T) {
	leader := &fakeMaster{stateID: 42}
	leaderAddr := serveFake(t, leader)
	follower := &fakeMaster{leader: leaderAddr}
	followerAddr := serveFake(t, follower)
	mc, set := masterClient(t, closedAddr(t), followerAddr, leaderAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := mc.ClusterInfo(ctx, &pb.ClusterInfoRequest{})
	if err != nil || resp.StateId != 42 {
		t.Fatalf("ClusterInfo through the set = %v, %v; want the leader's answer", resp, err)
	}
	if set.Leader() != leaderAddr {
		t.Fatalf("set goes to %s first, want the leader %s", set.Leader(), leaderAddr)
	}
	before := follower.calls.Load()
	if _, err := mc.ClusterInfo(ctx, &pb.ClusterInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if follower.calls.Load() != before {
		t.Fatal("a second call asked the follower again instead of the known leader")
	}
}

func TestMasterSetReturnsAnswersWithoutFailover(t *testing.T) {
	first := &fakeMaster{err: chunkfs.E("info", "/x", chunkfs.KindNotExist, "")}
	second := &fakeMaster{stateID: 7}
	mc, _ := masterClient(t, serveFake(t, first), serveFake(t, second))
	_, err := mc.ClusterInfo(context.Background(), &pb.ClusterInfoRequest{})
	if chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("a master's error answer = %v, want it returned as it is", err)
	}
	// A server's own "unavailable" (safe mode, say) is an answer too.
	first.err = chunkfs.E("create", "/x", chunkfs.KindUnavailable, "safe mode")
	_, err = mc.ClusterInfo(context.Background(), &pb.ClusterInfoRequest{})
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable || Unreachable(err) {
		t.Fatalf("a master's unavailable answer = %v, want it returned, not failed over", err)
	}
	if second.calls.Load() != 0 {
		t.Fatalf("the second master was asked %d times", second.calls.Load())
	}
}

func TestMasterSetGivesUpAtTheDeadline(t *testing.T) {
	// Refuses with no leader known, as during an election.
	a := &fakeMaster{err: &chunkfs.Error{Kind: chunkfs.KindNotLeader, Err: &chunkfs.LeaderHint{}}}
	mc, _ := masterClient(t, serveFake(t, a), closedAddr(t))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := mc.ClusterInfo(ctx, &pb.ClusterInfoRequest{})
	if k := chunkfs.KindOf(err); k != chunkfs.KindNotLeader && k != chunkfs.KindUnavailable {
		t.Fatalf("with no leader: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %v, long past the 300ms deadline", took)
	}
	if a.calls.Load() < 2 {
		t.Fatalf("asked the refusing master %d times; want retries until the deadline", a.calls.Load())
	}
}

func TestLeaderHintCrossesTheWire(t *testing.T) {
	in := &chunkfs.Error{Op: "create", Kind: chunkfs.KindNotLeader, Err: &chunkfs.LeaderHint{Leader: "10.0.0.2:7070"}}
	var hint *chunkfs.LeaderHint
	if out := Err(Status(in)); !errors.As(out, &hint) || hint.Leader != "10.0.0.2:7070" {
		t.Fatalf("Err(Status(%v)) = %v, want the leader hint", in, out)
	}
	if Unreachable(nil) || Unreachable(errors.New("x")) {
		t.Fatal("plain errors counted as transport failures")
	}
	if Unreachable(Err(Status(in))) {
		t.Fatal("a master's refusal counted as unreachable")
	}
}

func TestNewMasterSetNeedsAnAddress(t *testing.T) {
	if _, err := NewMasterSet(NewPool(), nil); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Fatalf("NewMasterSet(nil) = %v", err)
	}
}

// statMaster answers Stat as it is told, counting calls.
type statMaster struct {
	pb.UnimplementedMasterServer
	err   error
	calls atomic.Int64
}

func (s *statMaster) Stat(ctx context.Context, req *pb.StatRequest) (*pb.StatResponse, error) {
	s.calls.Add(1)
	if s.err != nil {
		return nil, s.err
	}
	return &pb.StatResponse{StateId: req.MinStateId}, nil
}

func serveStat(t *testing.T, s *statMaster) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(nil)
	pb.RegisterMasterServer(srv, s)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func TestMasterSetSendsReadsToObservers(t *testing.T) {
	leader, observer := &statMaster{}, &statMaster{}
	mc, set := masterClient(t, serveStat(t, leader))
	set.SetReaders([]string{serveStat(t, observer)})
	ctx := context.Background()
	for range 3 {
		if _, err := mc.Stat(ctx, &pb.StatRequest{Path: "/", MinStateId: 9}); err != nil {
			t.Fatal(err)
		}
	}
	if observer.calls.Load() != 3 || leader.calls.Load() != 0 {
		t.Fatalf("observer answered %d stats, leader %d; want all at the observer", observer.calls.Load(), leader.calls.Load())
	}
	observer.err = chunkfs.E("stat", "", chunkfs.KindUnavailable, "master too far behind")
	if _, err := mc.Stat(ctx, &pb.StatRequest{Path: "/"}); err != nil {
		t.Fatalf("stat with the observer behind: %v", err)
	}
	if leader.calls.Load() != 1 {
		t.Fatal("a read the observer refused did not go to the leader")
	}
	observer.err = chunkfs.E("stat", "/x", chunkfs.KindNotExist, "")
	if _, err := mc.Stat(ctx, &pb.StatRequest{Path: "/x"}); chunkfs.KindOf(err) != chunkfs.KindNotExist || leader.calls.Load() != 1 {
		t.Fatalf("the observer's answer %v was not the read's (leader asked %d times)", err, leader.calls.Load())
	}
	if coordinatedRead("/chunkfs.v1.Master/Create", nil) || !coordinatedRead("/chunkfs.v1.Master/GetChunks", nil) {
		t.Fatal("coordinatedRead classifies calls wrongly")
	}
	if coordinatedRead("/chunkfs.v1.Master/Batch", &pb.BatchRequest{Ops: []*pb.MetaOp{{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{}}}}}) {
		t.Fatal("a batch with a create counted as a read")
	}
}

// readMaster answers Stat as a master of a group does: a leader always,
// a follower (leader set) unless the call is for the leader alone.
type readMaster struct {
	pb.UnimplementedMasterServer
	leader string
	served atomic.Int64
}

func (f *readMaster) Stat(ctx context.Context, _ *pb.StatRequest) (*pb.StatResponse, error) {
	if f.leader != "" && LeaderOnly(ctx) {
		return nil, &chunkfs.Error{Op: "stat", Kind: chunkfs.KindNotLeader, Err: &chunkfs.LeaderHint{Leader: f.leader}}
	}
	f.served.Add(1)
	return &pb.StatResponse{}, nil
}

// After a failover a set reading from the leader only skips the dead
// leader to a follower, which refuses the read naming the new leader: the
// reads, this one and the next, go to the new leader, not to the follower
// (which would answer them, and keep the set there until a write moved it).
func TestMasterSetLeaderReadsLeaveAFollower(t *testing.T) {
	leader := &readMaster{}
	lis := serveRead(t, leader)
	follower := &readMaster{leader: lis}
	fol := serveRead(t, follower)
	for _, only := range []bool{false, true} {
		leader.served.Store(0)
		follower.served.Store(0)
		mc, set := masterClient(t, closedAddr(t), fol, lis)
		set.SetLeaderReads(only)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for range 3 {
			if _, err := mc.Stat(ctx, &pb.StatRequest{Path: "/"}); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		switch {
		case only && (leader.served.Load() != 3 || follower.served.Load() != 0 || set.Leader() != lis):
			t.Errorf("leader reads: leader served %d, follower %d, set at %s (leader %s)", leader.served.Load(), follower.served.Load(), set.Leader(), lis)
		case !only && follower.served.Load() != 3:
			t.Errorf("reads anywhere: follower served %d of 3", follower.served.Load())
		}
	}
}

func serveRead(t *testing.T, f *readMaster) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(nil)
	pb.RegisterMasterServer(srv, f)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestMasterSetSkipsAServerThatIsNoMaster: a master's address answered
// by another kind of server (one that took the port while the master was
// down) counts as a master not reached: the call goes to the next.
func TestMasterSetSkipsAServerThatIsNoMaster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := NewServer(nil)
	pb.RegisterChunkServerServer(other, pb.UnimplementedChunkServerServer{})
	go other.Serve(ln)
	t.Cleanup(other.Stop)
	m := &statMaster{}
	mc, _ := masterClient(t, ln.Addr().String(), serveStat(t, m))
	if _, err := mc.Stat(context.Background(), &pb.StatRequest{Path: "/"}); err != nil || m.calls.Load() != 1 {
		t.Fatalf("stat with the first address no master: %v, %d calls at the master", err, m.calls.Load())
	}
}
