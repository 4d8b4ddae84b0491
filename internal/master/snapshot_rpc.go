package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// MakeSnapshot makes req.Dst a copy-on-write snapshot of the file or tree
// at req.Src (GFS §3.4): with every allocation and lease stripe held (no
// chunk of the source can be placed, granted or copied meanwhile), it
// revokes the leases out on the source's chunks, or refuses with
// KindUnavailable while one must be waited out, then logs the snapshot as
// one command. Renames and links wait meanwhile (snapMu), so no leased
// file moves into the source between the look at its leases and the log;
// other metadata mutations (create, mkdir, delete, ...) go on, held only
// while the command applies.
func (m service) MakeSnapshot(ctx context.Context, req *pb.SnapshotRequest) (*pb.SnapshotResponse, error) {
	const op = "snapshot"
	c, err := m.pathArg(ctx, "MakeSnapshot", op, req.Src, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := namespace.ValidatePath(op, req.Dst); err != nil {
		return nil, err
	}
	if !m.leads() {
		return nil, m.notLeader(op)
	}
	// Revocations and the log entry finish once begun, whatever the client does.
	ctx = context.WithoutCancel(ctx)
	unlock := m.lockAllStripes()
	defer unlock()
	// No rename or link moves a leased file into the source until the
	// snapshot is logged.
	m.snapMu.Lock()
	defer m.snapMu.Unlock()
	var handles []chunkfs.Handle
	m.state.read(func(ns *namespace.Namespace) {
		err = ns.TreeChunks(c, req.Src, func(h chunkfs.Handle) { handles = append(handles, h) })
	})
	if err != nil {
		return nil, err
	}
	revoked, err := m.revokeLeases(ctx, "snapshot", req.Src, handles)
	if err != nil {
		return nil, err
	}
	r, id, err := m.mutate(ctx, &namespace.Command{Op: namespace.OpSnapshot, Caller: c, Path: req.Src, Target: req.Dst})
	if err != nil {
		return nil, err
	}
	m.cfg.Logger.InfoContext(ctx, "snapshot taken", "src", req.Src, "dst", req.Dst, "chunks", len(handles), "revoked", revoked)
	return &pb.SnapshotResponse{StateId: id, Info: rpc.FileInfoTo(r.Info), Revoked: int64(revoked)}, nil
}
