package master

import (
	"context"

	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Link gives an existing file a further name (a hard link): authorised as
// a create is, and decided by the namespace as link(2) decides.
func (m service) Link(ctx context.Context, req *pb.LinkRequest) (*pb.LinkResponse, error) {
	c, err := m.pathArg(ctx, "Link", "link", req.Src, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := namespace.ValidatePath("link", req.Dst); err != nil {
		return nil, err
	}
	m.snapMu.RLock()
	r, id, err := m.mutate(ctx, &namespace.Command{Op: namespace.OpLink, Caller: c, Path: req.Src, Target: req.Dst})
	m.snapMu.RUnlock()
	if err != nil {
		return nil, err
	}
	return &pb.LinkResponse{StateId: id, Info: rpc.FileInfoTo(r.Info)}, nil
}
