package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Register takes a chunkserver's full report (Master.registerServer).
func (m service) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	a, err := m.registerServer(ctx, senderFrom(req), registrationFrom(req))
	if err != nil {
		return nil, err
	}
	return registerTo(a), nil
}

// registerTo is a registration's answer on the wire.
func registerTo(a registerAnswer) *pb.RegisterResponse {
	return &pb.RegisterResponse{StateId: a.stateID, HeartbeatIntervalMs: a.beatEvery.Milliseconds(), TokenKeys: keysTo(a.keys),
		ClusterId: a.cluster, Garbage: handlesTo(a.garbage), Stale: handlesTo(a.stale)}
}

// Heartbeat records a chunkserver's figures and sample (Master.beatServer).
func (m service) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	a, err := m.beatServer(ctx, senderFrom(req), beatFrom(req))
	if err != nil {
		return nil, err
	}
	return beatTo(a), nil
}

// beatTo is a heartbeat's answer on the wire.
func beatTo(a beatAnswer) *pb.HeartbeatResponse {
	return &pb.HeartbeatResponse{StateId: a.stateID, LeaseMs: a.leaseFor.Milliseconds(), TokenKeys: keysTo(a.keys),
		Reregister: a.reregister, Garbage: handlesTo(a.garbage), Extended: handlesTo(a.extended)}
}

// ReportCorrupt forgets a replica that failed its checksum and tells its
// server to delete it.
func (m service) ReportCorrupt(ctx context.Context, req *pb.ReportCorruptRequest) (*pb.ReportCorruptResponse, error) {
	id, err := m.reportCorrupt(req.Replica, req.Reporter, chunkfs.Handle(req.Handle))
	if err != nil {
		return nil, err
	}
	return &pb.ReportCorruptResponse{StateId: id}, nil
}

// ClusterReport answers the master's cluster report.
func (m service) ClusterReport(ctx context.Context, req *pb.ClusterReportRequest) (*pb.ClusterReportResponse, error) {
	return reportTo(m.clusterReport()), nil
}

// reportTo is a cluster report on the wire.
func reportTo(r clusterReport) *pb.ClusterReportResponse {
	resp := &pb.ClusterReportResponse{
		StateId: r.stateID, Files: r.live.Files, Directories: r.live.Dirs, Chunks: r.live.Chunks, Bytes: r.live.Bytes,
		DeadFiles: r.dead.Files, DeadDirectories: r.dead.Dirs, DeadChunks: r.dead.Chunks, DeadBytes: r.dead.Bytes,
		ChunkSize: r.chunkSize, UnderReplicated: r.underReplicated, Missing: r.missing, MissingHeldBack: r.missingHeldBack, BeingCloned: r.beingCloned,
		Corrupt: r.corrupt, RepairRate: r.repairRate, Repaired: r.repaired, SafeMode: r.safeMode,
		SafeModeReason: r.safeModeReason, SafeModeHeld: r.safeModeHeld, Balance: balanceTo(r.balance),
		Servers: make([]*pb.ChunkServerStatus, len(r.servers)),
	}
	for i, s := range r.servers {
		resp.Servers[i] = &pb.ChunkServerStatus{
			Id: s.id, Addr: s.addr, Rack: s.rack, Capacity: s.capacity, Used: s.used, Free: s.free, Load: s.load,
			Chunks: s.chunks, Alive: s.alive, LastHeartbeatMs: s.sinceBeat.Milliseconds(), Disks: disksTo(s.disks),
			State: s.state, DrainRemaining: s.drainRemaining,
		}
	}
	return resp
}
