package client

import (
	"context"
	"io/fs"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// Mknod makes a fifo (mode has fs.ModeNamedPipe), a Unix domain socket
// (fs.ModeSocket) or a device node (fs.ModeDevice, with fs.ModeCharDevice
// for a character device; dev is its number in Linux's encoding, as
// unix.Mkdev makes it) at path, with the permission bits of mode less
// Config.Umask, and describes it. All are metadata-only: a name, an
// owner, a mode, times and the device number, never data in the cluster
// (the kernel of the machine that opens one carries its traffic).
func (c *Client) Mknod(ctx context.Context, path string, mode fs.FileMode, dev uint32) (*chunkfs.FileInfo, error) {
	ctx = reqid.Ensure(ctx)
	path, err := checkPath("mknod", path)
	if err != nil {
		return nil, err
	}
	typ := mode.Type()
	switch {
	case typ != fs.ModeNamedPipe && typ != fs.ModeSocket && typ != fs.ModeDevice && typ != fs.ModeDevice|fs.ModeCharDevice:
		return nil, chunkfs.E("mknod", path, chunkfs.KindInvalid, "only fifos, sockets and devices")
	case dev != 0 && typ&fs.ModeDevice == 0:
		return nil, chunkfs.E("mknod", path, chunkfs.KindInvalid, "a device number for a device node only")
	}
	fi, _, err := c.createCall(ctx, createSpec{path: path, exclusive: true, mode: uint32(typ | mode&modeBits&^c.cfg.Umask), rdev: dev})
	if err != nil {
		return nil, wrapOp("mknod", path, err)
	}
	return fi, nil
}
