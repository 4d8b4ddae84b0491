package master

import (
	"io/fs"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// nobody is the identity of a request that names no caller.
var nobody = chunkfs.Caller{UID: 65534, GIDs: []uint32{65534}}

// modeArg keeps the permission, setuid, setgid and sticky bits of a mode.
func modeArg(m uint32) uint32 {
	return m & uint32(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
}

// disksFrom converts a server's reported disks, keeping at most maxDisks.
func disksFrom(in []*pb.Disk) []disk {
	out := make([]disk, 0, min(len(in), maxDisks))
	for _, d := range in[:min(len(in), maxDisks)] {
		out = append(out, disk{id: d.Id, capacity: d.Capacity, free: d.Free})
	}
	return out
}

func disksTo(in []disk) []*pb.Disk {
	out := make([]*pb.Disk, len(in))
	for i, d := range in {
		out[i] = &pb.Disk{Id: d.id, Capacity: d.capacity, Free: d.free}
	}
	return out
}

// replicasFrom converts reported replicas.
func replicasFrom(in []*pb.ChunkReplica) []replica {
	out := make([]replica, len(in))
	for i, c := range in {
		out[i] = replica{handle: chunkfs.Handle(c.Handle), version: chunkfs.Version(c.Version)}
	}
	return out
}

func handlesFrom(in []uint64) []chunkfs.Handle {
	out := make([]chunkfs.Handle, len(in))
	for i, h := range in {
		out[i] = chunkfs.Handle(h)
	}
	return out
}

func handlesTo(in []chunkfs.Handle) []uint64 {
	if in == nil {
		return nil
	}
	out := make([]uint64, len(in))
	for i, h := range in {
		out[i] = uint64(h)
	}
	return out
}

// senderFrom is what a registration or a heartbeat says of its server
// beside its report.
func senderFrom(req interface {
	GetClusterId() string
	GetBytesRead() int64
	GetBytesWritten() int64
}) sender {
	return sender{cluster: req.GetClusterId(), read: req.GetBytesRead(), written: req.GetBytesWritten()}
}

// registrationFrom converts a registration.
func registrationFrom(req *pb.RegisterRequest) fullReport {
	return fullReport{
		figures: figures{id: req.Id, addr: req.Addr, rack: req.Rack, capacity: req.Capacity, used: req.Used, free: req.Free, disks: disksFrom(req.Disks)},
		chunks:  replicasFrom(req.Chunks),
		leases:  heldFrom(req.Leases),
	}
}

// beatFrom converts a heartbeat.
func beatFrom(req *pb.HeartbeatRequest) beat {
	return beat{
		figures: figures{id: req.Id, addr: req.Addr, capacity: req.Capacity, used: req.Used, free: req.Free, load: req.Load, disks: disksFrom(req.Disks)},
		sample:  replicasFrom(req.Sample), corrupt: handlesFrom(req.Corrupt), extend: handlesFrom(req.ExtendLeases),
		leases: heldFrom(req.Leases), deleted: handlesFrom(req.Deleted),
	}
}

// heldFrom converts the leases a chunkserver reports holding.
func heldFrom(in []*pb.HeldLease) []heldReport {
	out := make([]heldReport, 0, len(in))
	for _, l := range in {
		out = append(out, heldReport{handle: chunkfs.Handle(l.Handle), version: chunkfs.Version(l.Version), left: time.Duration(l.RemainingMs) * time.Millisecond})
	}
	return out
}
