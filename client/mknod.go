package client

import (
	"context"
	"io/fs"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Mknod makes a fifo (mode has fs.ModeNamedPipe) or a Unix domain socket
// (fs.ModeSocket) at path, with the permission bits of mode less
// Config.Umask, and describes it. Both are metadata-only: a name, an
// owner, a mode and times, never data in the cluster (a FUSE mount's
// kernel carries a fifo's or socket's traffic itself). Device nodes are
// not supported.
func (c *Client) Mknod(ctx context.Context, path string, mode fs.FileMode) (*chunkfs.FileInfo, error) {
	path, err := checkPath("mknod", path)
	if err != nil {
		return nil, err
	}
	typ := mode.Type()
	if typ != fs.ModeNamedPipe && typ != fs.ModeSocket {
		return nil, chunkfs.E("mknod", path, chunkfs.KindInvalid, "only fifos and sockets")
	}
	resp, err := c.master.Create(ctx, &pb.CreateRequest{
		Caller: c.caller, Path: path, Exclusive: true,
		Mode: uint32(typ | mode&modeBits&^c.cfg.Umask),
	})
	if err != nil {
		return nil, wrapOp("mknod", path, err)
	}
	c.observe(resp.StateId)
	return fileInfo(resp.Info), nil
}
