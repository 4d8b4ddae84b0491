package chunkserver

import (
	"context"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// The RPC edge. The generated pb types appear only in this file and in
// service.go (the gRPC handlers); everything else in the package reasons
// in its own types. Each message is converted here, once in each
// direction: the first section turns what arrives (requests to this
// server, answers to its calls) into the server's types, the second turns
// the server's types into its answers and the parts of its reports. The
// last section is the calls this server makes to its peers and masters,
// spoken in its own types; each builds its request. TestPBOnlyAtTheEdge
// keeps it so.

// From the wire: pb → the server's types.

func leaseFrom(r *pb.LeaseRequest) leaseGrant {
	term := time.Duration(-1) // out of range: refused by lease
	if r.LeaseMs >= 0 && r.LeaseMs <= maxLeaseTerm.Milliseconds() {
		term = time.Duration(r.LeaseMs) * time.Millisecond
	}
	return leaseGrant{Handle: chunkfs.Handle(r.Handle), Version: chunkfs.Version(r.Version), Create: r.Create, Term: term}
}

func writeFrom(r *pb.WriteRequest) request {
	return request{Handle: chunkfs.Handle(r.Handle), Version: chunkfs.Version(r.Version), Offset: r.Offset,
		Length: r.Length, Data: chunkfs.DataID(r.DataId), Secondaries: r.Secondaries, Token: r.Token}
}

func appendFrom(r *pb.AppendRequest) request {
	return request{Handle: chunkfs.Handle(r.Handle), Version: chunkfs.Version(r.Version), Length: r.Length,
		ChunkSize: r.ChunkSize, Data: chunkfs.DataID(r.DataId), Secondaries: r.Secondaries, Token: r.Token}
}

func reserveFrom(r *pb.ReserveRequest) request {
	return request{Handle: chunkfs.Handle(r.Handle), Version: chunkfs.Version(r.Version), Length: r.Length,
		ChunkSize: r.ChunkSize, Data: chunkfs.DataID(r.DataId), Secondaries: r.Secondaries, Token: r.Token}
}

func syncFrom(r *pb.SyncRequest) request {
	return request{Handle: chunkfs.Handle(r.Handle), Version: chunkfs.Version(r.Version), Secondaries: r.Secondaries, Token: r.Token}
}

func mutationFrom(r *pb.ApplyRequest) mutation {
	return mutation{Handle: chunkfs.Handle(r.Handle), Version: chunkfs.Version(r.Version), Serial: r.Serial,
		Offset: r.Offset, Length: r.Length, Data: chunkfs.DataID(r.DataId), Pad: r.Pad}
}

func truncationFrom(r *pb.TruncateRequest) truncation {
	return truncation{Handle: chunkfs.Handle(r.Handle), Version: chunkfs.Version(r.Version), Length: r.Length}
}

func cloneFrom(r *pb.CloneRequest) cloneOrder {
	return cloneOrder{Handle: chunkfs.Handle(r.Handle), Version: chunkfs.Version(r.Version), Source: r.Source, Length: r.Length, Urgent: r.Urgent}
}

func chunkInfoFrom(r *pb.ChunkInfoRequest) (chunkfs.Handle, []byte) {
	return chunkfs.Handle(r.Handle), r.Token
}

func handlesFrom(hs []uint64) []chunkfs.Handle {
	out := make([]chunkfs.Handle, len(hs))
	for i, h := range hs {
		out[i] = chunkfs.Handle(h)
	}
	return out
}

// replicaFrom reads a peer's ChunkInfo answer.
func replicaFrom(r *pb.ChunkInfoResponse) replicaState {
	return replicaState{Version: chunkfs.Version(r.Version), Length: r.Length, Primary: r.Primary,
		LeaseLeft: time.Duration(r.LeaseMs) * time.Millisecond, NoSpace: r.NoSpace}
}

// keysFrom reads the token keys of a master's answer; a key whose secret
// is not a key's size is dropped.
func keysFrom(keys []*pb.TokenKey) []token.Key {
	var out []token.Key
	for _, pk := range keys {
		key := token.Key{ID: pk.Id, Until: time.UnixMilli(pk.ExpiresUnixMs).UTC()}
		if len(pk.Secret) != len(key.Secret) {
			continue
		}
		copy(key.Secret[:], pk.Secret)
		out = append(out, key)
	}
	return out
}

// registeredFrom reads a master's answer to a registration: its garbage
// and stale replicas are both to be deleted.
func registeredFrom(r *pb.RegisterResponse) masterAnswer {
	return masterAnswer{Keys: keysFrom(r.TokenKeys), Garbage: handlesFrom(append(r.Garbage, r.Stale...)), Cluster: r.ClusterId}
}

func heartbeatAnswerFrom(r *pb.HeartbeatResponse) masterAnswer {
	return masterAnswer{Keys: keysFrom(r.TokenKeys), Garbage: handlesFrom(r.Garbage), Reregister: r.Reregister,
		Extended: handlesFrom(r.Extended), LeaseTerm: time.Duration(r.LeaseMs) * time.Millisecond}
}

// To the wire: the server's types → pb.

func leaseTo(length int64) *pb.LeaseResponse { return &pb.LeaseResponse{Length: length} }

func appendTo(off int64) *pb.AppendResponse { return &pb.AppendResponse{Offset: off} }

func cloneTo(length int64) *pb.CloneResponse { return &pb.CloneResponse{Length: length} }

func chunkInfoTo(r replicaState) *pb.ChunkInfoResponse {
	resp := &pb.ChunkInfoResponse{Version: uint64(r.Version), Length: r.Length, Primary: r.Primary, NoSpace: r.NoSpace}
	if r.Primary {
		resp.LeaseMs = r.LeaseLeft.Milliseconds()
	}
	return resp
}

func handlesTo(hs []chunkfs.Handle) []uint64 {
	if len(hs) == 0 {
		return nil
	}
	out := make([]uint64, len(hs))
	for i, h := range hs {
		out[i] = uint64(h)
	}
	return out
}

func replicasTo(in []chunkstore.Info) []*pb.ChunkReplica {
	var out []*pb.ChunkReplica
	for _, r := range in {
		out = append(out, &pb.ChunkReplica{Handle: uint64(r.Handle), Version: uint64(r.Version), Length: r.Length})
	}
	return out
}

func disksTo(disks []chunkstore.Disk) []*pb.Disk {
	var out []*pb.Disk
	for _, d := range disks {
		out = append(out, &pb.Disk{Id: d.ID, Capacity: d.Total, Free: d.Free})
	}
	return out
}

func leasesTo(leases []heldLease) []*pb.HeldLease {
	var out []*pb.HeldLease
	for _, l := range leases {
		out = append(out, &pb.HeldLease{Handle: uint64(l.Handle), Version: uint64(l.Version), RemainingMs: l.Left.Milliseconds()})
	}
	return out
}

// Calls to peers and masters.

// peerLink is a connection to another chunkserver.
type peerLink struct{ c pb.ChunkServerClient }

// apply has a secondary apply a mutation the primary ordered.
func (p peerLink) apply(ctx context.Context, m mutation) error {
	_, err := p.c.Apply(ctx, &pb.ApplyRequest{Handle: uint64(m.Handle), Version: uint64(m.Version), Serial: m.Serial,
		Offset: m.Offset, DataId: uint64(m.Data), Length: m.Length, Pad: m.Pad})
	return err
}

// sync has a secondary fsync the chunk: the client's request, naming no
// further secondaries.
func (p peerLink) sync(ctx context.Context, r request) error {
	_, err := p.c.Sync(ctx, &pb.SyncRequest{Handle: uint64(r.Handle), Version: uint64(r.Version), Token: r.Token})
	return err
}

// chunkInfo asks a peer of its replica of h.
func (p peerLink) chunkInfo(ctx context.Context, h chunkfs.Handle, tok []byte) (replicaState, error) {
	resp, err := p.c.ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: uint64(h), Token: tok})
	if err != nil {
		return replicaState{}, err
	}
	return replicaFrom(resp), nil
}

// masterLink is a connection to a master.
type masterLink struct{ c pb.MasterClient }

// register registers this server with a master.
func (m masterLink) register(ctx context.Context, r registration) (masterAnswer, error) {
	resp, err := m.c.Register(ctx, &pb.RegisterRequest{Id: r.ID, Addr: r.Addr, Rack: r.Rack, ClusterId: r.Cluster,
		Capacity: r.Space.capacity, Used: r.Space.used, Free: r.Space.free, Disks: disksTo(r.Space.disks),
		Leases: leasesTo(r.Leases), BytesRead: r.Read, BytesWritten: r.Written, Chunks: replicasTo(r.Chunks)})
	if err != nil {
		return masterAnswer{}, err
	}
	return registeredFrom(resp), nil
}

// heartbeat reports to a master what changed since the last beat.
func (m masterLink) heartbeat(ctx context.Context, b heartbeat) (masterAnswer, error) {
	resp, err := m.c.Heartbeat(ctx, &pb.HeartbeatRequest{Id: b.ID, Addr: b.Addr, ClusterId: b.Cluster,
		Capacity: b.Space.capacity, Used: b.Space.used, Free: b.Space.free, Disks: disksTo(b.Space.disks),
		Load: b.Load, Sample: replicasTo(b.Sample), BytesRead: b.Read, BytesWritten: b.Written,
		Deleted: handlesTo(b.Deleted), Leases: leasesTo(b.Leases), Corrupt: handlesTo(b.Corrupt), ExtendLeases: handlesTo(b.Extend)})
	if err != nil {
		return masterAnswer{}, err
	}
	return heartbeatAnswerFrom(resp), nil
}

// reportCorrupt tells the master that self's replica of h failed its
// checksum.
func (m masterLink) reportCorrupt(ctx context.Context, self string, h chunkfs.Handle) error {
	_, err := m.c.ReportCorrupt(ctx, &pb.ReportCorruptRequest{Reporter: self, Handle: uint64(h), Replica: self})
	return err
}
