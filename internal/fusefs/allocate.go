package fusefs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fallocate(2)'s mode bit this mount honours.
const fallocKeepSize = 0x01 // FALLOC_FL_KEEP_SIZE

var _ = (gofs.FileAllocater)((*handle)(nil))

// Allocate is fallocate(2). A cluster allocates a chunk when it is first
// written, on servers chosen then, so no space can be set aside ahead of
// the writes: mode 0 extends the file to off+size when it is shorter (the
// new range reads as zeros, as after fallocate), and FALLOC_FL_KEEP_SIZE
// changes nothing. Punching holes, zeroing, collapsing and inserting
// ranges are not supported (EOPNOTSUPP), as on many networked file
// systems.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if mode&^fallocKeepSize != 0 {
		return syscall.EOPNOTSUPP
	}
	if !h.write {
		return syscall.EBADF
	}
	end := off + size
	if size == 0 || end < off || end > 1<<62 {
		return syscall.EINVAL
	}
	if mode&fallocKeepSize != 0 {
		return 0
	}
	var attr fuse.AttrOut
	if st := h.n.Getattr(ctx, h, &attr); st != 0 {
		return st
	}
	if end <= attr.Size {
		return 0
	}
	length := int64(end)
	in := &fuse.SetAttrIn{}
	in.Valid = fuse.FATTR_SIZE
	in.Size = uint64(length)
	return h.n.Setattr(ctx, h, in, &attr)
}
