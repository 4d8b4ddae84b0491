package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Extended attributes: reads are served like Stat (observers too), changes
// go through the log like SetAttr. Sizes are checked here, before a
// command is logged, and again where it is applied.

// GetXattr returns one attribute's value.
func (m service) GetXattr(ctx context.Context, req *pb.GetXattrRequest) (*pb.GetXattrResponse, error) {
	const op = "getxattr"
	c, err := m.pathArg(ctx, "GetXattr", op, req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := xattrNameArg(op, req.Path, req.Name); err != nil {
		return nil, err
	}
	if err := m.readable(ctx, op, req.MinStateId); err != nil {
		return nil, err
	}
	var v []byte
	id := m.state.read(func(ns *namespace.Namespace) { v, err = ns.Xattr(c, req.Path, req.Name) })
	if err != nil {
		return nil, err
	}
	return &pb.GetXattrResponse{StateId: id, Value: v}, nil
}

// ListXattr returns the names of the attributes the caller may see.
func (m service) ListXattr(ctx context.Context, req *pb.ListXattrRequest) (*pb.ListXattrResponse, error) {
	const op = "listxattr"
	c, err := m.pathArg(ctx, "ListXattr", op, req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := m.readable(ctx, op, req.MinStateId); err != nil {
		return nil, err
	}
	var names []string
	id := m.state.read(func(ns *namespace.Namespace) { names, err = ns.Xattrs(c, req.Path) })
	if err != nil {
		return nil, err
	}
	return &pb.ListXattrResponse{StateId: id, Names: names}, nil
}

// SetXattr creates or replaces one attribute.
func (m service) SetXattr(ctx context.Context, req *pb.SetXattrRequest) (*pb.SetXattrResponse, error) {
	const op = "setxattr"
	c, err := m.pathArg(ctx, "SetXattr", op, req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := xattrNameArg(op, req.Path, req.Name); err != nil {
		return nil, err
	}
	if len(req.Value) > namespace.MaxXattrValue {
		return nil, chunkfs.E(op, req.Path, chunkfs.KindTooLarge, "attribute value larger than 64 KiB")
	}
	cmd := &namespace.Command{Op: namespace.OpSetXattr, Caller: c, Path: req.Path, Target: req.Name, Value: req.Value}
	if cmd.Value == nil {
		cmd.Value = []byte{}
	}
	if req.Create {
		cmd.Set |= namespace.XattrCreate
	}
	if req.Replace {
		cmd.Set |= namespace.XattrReplace
	}
	_, id, err := m.mutate(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.SetXattrResponse{StateId: id}, nil
}

// RemoveXattr removes one attribute.
func (m service) RemoveXattr(ctx context.Context, req *pb.RemoveXattrRequest) (*pb.RemoveXattrResponse, error) {
	const op = "removexattr"
	c, err := m.pathArg(ctx, "RemoveXattr", op, req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := xattrNameArg(op, req.Path, req.Name); err != nil {
		return nil, err
	}
	_, id, err := m.mutate(ctx, &namespace.Command{Op: namespace.OpRemoveXattr, Caller: c, Path: req.Path, Target: req.Name})
	if err != nil {
		return nil, err
	}
	return &pb.RemoveXattrResponse{StateId: id}, nil
}

// xattrNameArg bounds a name before anything else looks at it.
func xattrNameArg(op, p, name string) error {
	if len(name) > namespace.MaxXattrName {
		return chunkfs.E(op, p, chunkfs.KindTooLarge, "attribute name longer than 255 bytes")
	}
	if name == "" {
		return chunkfs.E(op, p, chunkfs.KindInvalid, "empty attribute name")
	}
	return nil
}
