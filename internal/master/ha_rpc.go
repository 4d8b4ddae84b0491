package master

import (
	"context"

	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// anywhere are the calls every master answers; every other goes to the
// leader. Register and Heartbeat reach every master (each learns the
// chunk locations); a non-leader answers them without deciding anything
// (no garbage, no leases).
var anywhere = map[string]bool{
	"Stat": true, "List": true, "GetChunks": true, "ClusterInfo": true, "ClusterReport": true,
	"Fsck": true, "HAStatus": true, "Register": true, "Heartbeat": true,
	"GetXattr": true, "ListXattr": true, "TrashList": true,
}

// leaderGuard refuses, on a master that does not lead, every call only the
// leader takes: mutations, leases, msync, and any call its client marked
// for the leader alone (rpc.LeaderOnly: a client that reads from the
// leader only). A batch is read-only only if all its ops are stats.
func (m *Master) leaderGuard(ctx context.Context, method string, req any) error {
	if m.leads() {
		return nil
	}
	name := rpc.MethodName(method)
	if rpc.LeaderOnly(ctx) {
		return m.notLeader(name)
	}
	if anywhere[name] {
		return nil
	}
	if b, ok := req.(*pb.BatchRequest); ok && readOnlyBatch(b) {
		return nil
	}
	return m.notLeader(name)
}

func readOnlyBatch(b *pb.BatchRequest) bool {
	for _, op := range b.Ops {
		if op.GetStat() == nil {
			return false
		}
	}
	return true
}

// Msync answers, once a quorum confirms this master still leads, the
// state it has applied, so a client that adopts it sees every write
// acknowledged before the call (the leader applies a write before it
// acknowledges it). Not the Raft commit index: that counts entries the
// state never applies (elections' no-ops, membership changes), and a read
// asking for one of those would wait for the next write everywhere.
func (m service) Msync(ctx context.Context, _ *pb.MsyncRequest) (*pb.MsyncResponse, error) {
	if err := m.log.VerifyLeader(); err != nil {
		return nil, err
	}
	return &pb.MsyncResponse{StateId: m.state.stateID()}, nil
}

// HAStatus describes this master's view of the group.
func (m service) HAStatus(ctx context.Context, _ *pb.HAStatusRequest) (*pb.HAStatusResponse, error) {
	st, err := m.haStatus()
	if err != nil {
		return nil, err
	}
	return haStatusTo(st), nil
}

// haStatusTo is a group status on the wire.
func haStatusTo(st haStatus) *pb.HAStatusResponse {
	resp := &pb.HAStatusResponse{StateId: st.stateID, Id: st.id, Role: st.role, Applied: st.applied, Commit: st.commit,
		LeaderId: st.leaderID, LeaderAddr: st.leaderAddr, Members: make([]*pb.HAMember, len(st.members))}
	for i, mb := range st.members {
		resp.Members[i] = &pb.HAMember{Id: mb.ID, Addr: mb.Addr, Voter: mb.Voter}
	}
	return resp
}

// HAChange changes the group's membership or moves the leadership. Only
// the superuser, or another master, may (authGuard).
func (m service) HAChange(ctx context.Context, req *pb.HAChangeRequest) (*pb.HAChangeResponse, error) {
	if err := m.haChange(ctx, req.Op, req.Id, req.Addr); err != nil {
		return nil, err
	}
	return &pb.HAChangeResponse{StateId: uint64(m.StateID())}, nil
}

// joinCall asks the group's leader, through set, to add this master as an
// observer.
func (m *Master) joinCall(ctx context.Context, set *rpc.MasterSet) error {
	root := &pb.Caller{Uid: 0, Gids: []uint32{0}}
	_, err := pb.NewMasterClient(set).HAChange(ctx, &pb.HAChangeRequest{Caller: root, Op: "add-observer", Id: m.cfg.NodeID, Addr: m.advertised()})
	return err
}
