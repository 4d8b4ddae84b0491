package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TrashList returns one page of the trash entries the caller may see.
func (m service) TrashList(ctx context.Context, req *pb.TrashListRequest) (*pb.TrashListResponse, error) {
	c, err := m.caller(ctx, "TrashList", "trash list", "", req.Caller)
	if err != nil {
		return nil, err
	}
	resp := &pb.TrashListResponse{}
	var page []namespace.TrashEntry
	resp.StateId = m.state.read(func(ns *namespace.Namespace) {
		page, resp.More = ns.Trash(c, req.After, int(min(req.Limit, namespace.MaxListLimit)))
		resp.PeriodNs = ns.TrashPeriod()
	})
	resp.Entries = make([]*pb.TrashEntry, len(page))
	for i, e := range page {
		resp.Entries[i] = &pb.TrashEntry{Id: e.ID, Path: e.Path, DeletedNs: e.Time, ExpiresNs: e.Expires,
			DeletedBy: e.UID, Info: rpc.FileInfoTo(e.Info), Files: e.Counts.Files, Directories: e.Counts.Dirs,
			Chunks: e.Counts.Chunks, Bytes: e.Counts.Bytes}
	}
	return resp, nil
}

// Undelete brings a trash entry back, at its old path or another.
func (m service) Undelete(ctx context.Context, req *pb.UndeleteRequest) (*pb.UndeleteResponse, error) {
	cmd, err := m.trashCommand(ctx, "Undelete", "undelete", req.Path, req.Id, req.Caller)
	if err != nil {
		return nil, err
	}
	cmd.Op, cmd.Target = namespace.OpUndelete, req.To
	if req.To != "" {
		if err := namespace.ValidatePath("undelete", req.To); err != nil {
			return nil, err
		}
	}
	if req.Parents {
		cmd.Flags = namespace.FlagParents
	}
	r, id, err := m.mutate(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.UndeleteResponse{StateId: id, Info: rpc.FileInfoTo(r.Info)}, nil
}

// PurgeTrash frees one trash entry now.
func (m service) PurgeTrash(ctx context.Context, req *pb.PurgeTrashRequest) (*pb.PurgeTrashResponse, error) {
	if req.Id == 0 {
		return nil, chunkfs.E("purge trash", req.Path, chunkfs.KindInvalid, "which entry: an ID is needed")
	}
	cmd, err := m.trashCommand(ctx, "PurgeTrash", "purge trash", req.Path, req.Id, req.Caller)
	if err != nil {
		return nil, err
	}
	cmd.Op = namespace.OpPurgeTrash
	_, id, err := m.mutate(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.PurgeTrashResponse{StateId: id}, nil
}

// trashCommand checks the arguments naming a trash entry: a valid path,
// an ID, or both.
func (m *Master) trashCommand(ctx context.Context, method, op, p string, id uint64, pc *pb.Caller) (*namespace.Command, error) {
	if p == "" && id == 0 {
		return nil, chunkfs.E(op, "", chunkfs.KindInvalid, "which entry: a path or an ID is needed")
	}
	if id > 1<<62 {
		return nil, chunkfs.E(op, p, chunkfs.KindInvalid, "entry ID out of range")
	}
	if p != "" {
		if err := namespace.ValidatePath(op, p); err != nil {
			return nil, err
		}
	}
	c, err := m.caller(ctx, method, op, p, pc)
	if err != nil {
		return nil, err
	}
	return &namespace.Command{Caller: c, Path: p, Index: int64(id)}, nil
}
