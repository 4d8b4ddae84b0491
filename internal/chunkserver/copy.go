package chunkserver

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// CopyChunk makes a local copy of a replica under a new handle, at the
// same version: the master's copy-on-write of a chunk a snapshot shares,
// before it grants a lease on the copy. The source's mutations are held
// off while it is read (its order lock), and the copy is durable before
// the answer; on failure nothing of it is kept.
func (c *control) CopyChunk(ctx context.Context, req *pb.CopyChunkRequest) (*pb.CopyChunkResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	h, v, nh := chunkfs.Handle(req.Handle), chunkfs.Version(req.Version), chunkfs.Handle(req.NewHandle)
	if err := c.s.nodeOnly(ctx, "copy chunk", h); err != nil {
		return nil, err
	}
	switch {
	case h == 0 || nh == 0 || h == nh:
		return nil, invalid("copy chunk", h, "needs a chunk and a different new handle")
	case v == 0:
		return nil, invalid("copy chunk", h, "zero version")
	}
	st := c.s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	in, err := c.s.store.Copy(h, v, nh)
	if err != nil {
		c.s.log.Warn("copy failed", "chunk", chunkName(h), "version", v, "copy", chunkName(nh), "err", err)
		return nil, err
	}
	c.s.log.Info("copied", "chunk", chunkName(h), "version", v, "copy", chunkName(nh), "bytes", in.Length)
	return &pb.CopyChunkResponse{Length: in.Length}, nil
}
