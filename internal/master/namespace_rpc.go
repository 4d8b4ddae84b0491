package master

import (
	"context"
	"io/fs"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Mkdir makes a directory, and its parents when asked.
func (m service) Mkdir(ctx context.Context, req *pb.MkdirRequest) (*pb.MkdirResponse, error) {
	cmd, err := m.mkdirCommand(ctx, req)
	if err != nil {
		return nil, err
	}
	r, id, err := m.mutate(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return mkdirResponse(id, r.Info, m.parentAfter(cmd.Caller, cmd.Path)), nil
}

func (m *Master) mkdirCommand(ctx context.Context, req *pb.MkdirRequest) (*namespace.Command, error) {
	c, err := m.pathArg(ctx, "Mkdir", "mkdir", req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	cmd := &namespace.Command{Op: namespace.OpMkdir, Caller: c, Path: req.Path, Mode: modeArg(req.Mode)}
	if req.Parents {
		cmd.Flags = namespace.FlagParents
	}
	return cmd, nil
}

func mkdirResponse(id uint64, info chunkfs.FileInfo, parent *chunkfs.FileInfo) *pb.MkdirResponse {
	return &pb.MkdirResponse{StateId: id, Info: rpc.FileInfoTo(info), Parent: parentTo(parent)}
}

// Create makes a file or symbolic link, or opens (and maybe truncates) an
// existing file.
func (m service) Create(ctx context.Context, req *pb.CreateRequest) (*pb.CreateResponse, error) {
	cmd, err := m.createCommand(ctx, req)
	if err != nil {
		return nil, err
	}
	r, id, err := m.mutate(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return createResponse(id, r.Info, r.Created, m.parentAfter(cmd.Caller, cmd.Path)), nil
}

func (m *Master) createCommand(ctx context.Context, req *pb.CreateRequest) (*namespace.Command, error) {
	c, err := m.pathArg(ctx, "Create", "create", req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if len(req.SymlinkTarget) > chunkfs.MaxSymlinkLen {
		return nil, chunkfs.E("create", req.Path, chunkfs.KindTooLarge, "symbolic link target too long")
	}
	// The type bits of a fifo, socket or device node pass: they are
	// metadata-only inodes (the namespace checks the combination); a
	// device's number travels as the command's length.
	mode := modeArg(req.Mode) | req.Mode&uint32(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice)
	cmd := &namespace.Command{Op: namespace.OpCreate, Caller: c, Path: req.Path, Mode: mode,
		Replication: req.Replication, Target: req.SymlinkTarget, Rdev: req.Rdev, MTime: req.TimeNs}
	if req.Exclusive {
		cmd.Flags |= namespace.FlagExclusive
	}
	if req.Truncate {
		cmd.Flags |= namespace.FlagTruncate
	}
	if req.FirstChunk {
		cmd.Flags |= namespace.FlagFirstChunk // the namespace allocates only for a regular file made or truncated
	}
	return cmd, nil
}

func createResponse(id uint64, info chunkfs.FileInfo, created bool, parent *chunkfs.FileInfo) *pb.CreateResponse {
	return &pb.CreateResponse{StateId: id, Info: rpc.FileInfoTo(info), Created: created, Parent: parentTo(parent)}
}

// parentTo is a parent directory's attributes on the wire; none is nil.
func parentTo(fi *chunkfs.FileInfo) *pb.FileInfo {
	if fi == nil {
		return nil
	}
	return rpc.FileInfoTo(*fi)
}

// Stat describes a path without following a final symbolic link.
func (m service) Stat(ctx context.Context, req *pb.StatRequest) (*pb.StatResponse, error) {
	c, err := m.pathArg(ctx, "Stat", "stat", req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := m.readable(ctx, "stat", req.MinStateId); err != nil {
		return nil, err
	}
	var fi chunkfs.FileInfo
	id := m.state.read(func(ns *namespace.Namespace) { fi, err = ns.Stat(c, req.Path) })
	if err != nil {
		return nil, err
	}
	return &pb.StatResponse{StateId: id, Info: rpc.FileInfoTo(fi)}, nil
}

// List returns one page of a directory.
func (m service) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	c, err := m.pathArg(ctx, "List", "list", req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if len(req.After) > chunkfs.MaxNameLen {
		return nil, chunkfs.E("list", req.Path, chunkfs.KindInvalid, "cursor longer than a name")
	}
	if err := m.readable(ctx, "list", req.MinStateId); err != nil {
		return nil, err
	}
	var page []chunkfs.FileInfo
	var more bool
	id := m.state.read(func(ns *namespace.Namespace) {
		page, more, err = ns.List(c, req.Path, req.After, int(min(req.Limit, namespace.MaxListLimit)))
	})
	if err != nil {
		return nil, err
	}
	resp := &pb.ListResponse{StateId: id, More: more, Entries: make([]*pb.FileInfo, len(page))}
	for i, fi := range page {
		resp.Entries[i] = rpc.FileInfoTo(fi)
	}
	return resp, nil
}

// Rename moves a file or directory atomically.
func (m service) Rename(ctx context.Context, req *pb.RenameRequest) (*pb.RenameResponse, error) {
	cmd, err := m.renameCommand(ctx, req)
	if err != nil {
		return nil, err
	}
	_, id, err := m.rename(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.RenameResponse{StateId: id}, nil
}

func (m *Master) renameCommand(ctx context.Context, req *pb.RenameRequest) (*namespace.Command, error) {
	c, err := m.pathArg(ctx, "Rename", "rename", req.Src, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := namespace.ValidatePath("rename", req.Dst); err != nil {
		return nil, err
	}
	cmd := &namespace.Command{Op: namespace.OpRename, Caller: c, Path: req.Src, Target: req.Dst}
	switch {
	case req.NoReplace && req.Exchange:
		return nil, chunkfs.E("rename", req.Src, chunkfs.KindInvalid, "no-replace and exchange together")
	case req.NoReplace:
		cmd.Flags = namespace.FlagNoReplace
	case req.Exchange:
		cmd.Flags = namespace.FlagExchange
	}
	return cmd, nil
}

// Delete removes a file or directory (recursively when asked): into the
// trash while the grace period is above zero, unless the request skips
// it; chunks of what is deleted at once become garbage that chunkservers
// are told to delete.
func (m service) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	cmd, err := m.deleteCommand(ctx, req)
	if err != nil {
		return nil, err
	}
	_, id, err := m.mutate(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.DeleteResponse{StateId: id, Parent: parentTo(m.parentAfter(cmd.Caller, cmd.Path))}, nil
}

func (m *Master) deleteCommand(ctx context.Context, req *pb.DeleteRequest) (*namespace.Command, error) {
	c, err := m.pathArg(ctx, "Delete", "delete", req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	cmd := &namespace.Command{Op: namespace.OpTrash, Caller: c, Path: req.Path}
	if req.SkipTrash {
		cmd.Op = namespace.OpDelete
	}
	for _, f := range []struct {
		on   bool
		flag uint16
	}{{req.Recursive, namespace.FlagRecursive}, {req.DirOnly, namespace.FlagDirOnly}, {req.FileOnly, namespace.FlagFileOnly}} {
		if f.on {
			cmd.Flags |= f.flag
		}
	}
	return cmd, nil
}

// SetAttr changes mode, owner, group, times, replication or length at once.
// A truncation that cuts a chunk in its middle bumps the chunk's version
// and has its replicas cut; if none could be, the new length stands but the
// call fails (KindUnavailable) and should be retried, which cuts again.
func (m service) SetAttr(ctx context.Context, req *pb.SetAttrRequest) (*pb.SetAttrResponse, error) {
	cmd, err := m.setAttrCommand(ctx, req)
	if err != nil {
		return nil, err
	}
	r, id, err := m.setAttr(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.SetAttrResponse{StateId: id, Info: rpc.FileInfoTo(r.Info)}, nil
}

func (m *Master) setAttrCommand(ctx context.Context, req *pb.SetAttrRequest) (*namespace.Command, error) {
	c, err := m.pathArg(ctx, "SetAttr", "setattr", req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	cmd := &namespace.Command{Op: namespace.OpSetAttr, Caller: c, Path: req.Path}
	if req.Mode != nil {
		cmd.Set |= namespace.SetMode
		cmd.Mode = modeArg(*req.Mode)
	}
	if req.Uid != nil {
		cmd.Set |= namespace.SetUID
		cmd.UID = *req.Uid
	}
	if req.Gid != nil {
		cmd.Set |= namespace.SetGID
		cmd.GID = *req.Gid
	}
	if req.AtimeNs != nil {
		cmd.Set |= namespace.SetATime
		cmd.ATime = *req.AtimeNs
	}
	if req.MtimeNs != nil {
		cmd.Set |= namespace.SetMTime
		cmd.MTime = *req.MtimeNs
	}
	if req.TimesNow {
		cmd.Flags |= namespace.FlagTimesNow
	}
	if req.Replication != nil {
		cmd.Set |= namespace.SetReplication
		cmd.Replication = *req.Replication
	}
	if req.Length != nil {
		cmd.Set |= namespace.SetLength
		cmd.Length = *req.Length
	}
	return cmd, nil
}

// CommitLength raises a file's length to what a writer reports.
func (m service) CommitLength(ctx context.Context, req *pb.CommitLengthRequest) (*pb.CommitLengthResponse, error) {
	cmd, err := m.commitLengthCommand(ctx, req)
	if err != nil {
		return nil, err
	}
	r, id, err := m.mutate(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.CommitLengthResponse{StateId: id, Length: r.Info.Length}, nil
}

func (m *Master) commitLengthCommand(ctx context.Context, req *pb.CommitLengthRequest) (*namespace.Command, error) {
	c, err := m.pathArg(ctx, "CommitLength", "commit length", req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	cmd := &namespace.Command{Op: namespace.OpCommitLength, Caller: c, Path: req.Path, Length: req.Length, MTime: req.MtimeNs}
	if req.Touch {
		cmd.Flags = namespace.FlagTouch
	}
	return cmd, nil
}

// ClusterInfo returns the cluster's constants.
func (m service) ClusterInfo(ctx context.Context, req *pb.ClusterInfoRequest) (*pb.ClusterInfoResponse, error) {
	var size int64
	var repl int
	var ready bool
	id := m.state.read(func(ns *namespace.Namespace) {
		size, repl, ready = ns.ChunkSize(), ns.DefaultReplication(), ns.Initialized()
	})
	if !ready {
		return nil, m.notLeader("cluster info") // a new group's namespace is made by its first leader
	}
	addr := m.advertised()
	if m.cfg.grouped() {
		_, addr = m.log.LeaderID()
	}
	return &pb.ClusterInfoResponse{StateId: id, ChunkSize: size, DefaultReplication: uint32(repl), Leader: addr}, nil
}
