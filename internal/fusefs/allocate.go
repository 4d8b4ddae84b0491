package fusefs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fallocate(2)'s mode bits this mount honours.
const (
	fallocKeepSize  = 0x01 // FALLOC_FL_KEEP_SIZE
	fallocPunchHole = 0x02 // FALLOC_FL_PUNCH_HOLE
	fallocZeroRange = 0x10 // FALLOC_FL_ZERO_RANGE
)

// zeroStep is how many zero bytes one write of a punched or zeroed range
// carries.
const zeroStep = 1 << 20

var _ = (gofs.FileAllocater)((*handle)(nil))

// Allocate is fallocate(2). A cluster allocates a chunk when it is first
// written, on servers chosen then, so no space can be set aside ahead of
// the writes: mode 0 extends the file to off+size when it is shorter (the
// new range reads as zeros, as after fallocate), and FALLOC_FL_KEEP_SIZE
// alone changes nothing. PUNCH_HOLE (with KEEP_SIZE, as Linux requires)
// and ZERO_RANGE make the range read as zeros by writing zeros over the
// part of it inside the file (ZERO_RANGE without KEEP_SIZE also extends
// the file); chunk replicas keep their blocks. The kernel drops its cached
// pages of the range. Collapsing and inserting ranges are not supported
// (EOPNOTSUPP), as on most networked file systems.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	switch mode {
	case 0, fallocKeepSize, fallocPunchHole | fallocKeepSize, fallocZeroRange, fallocZeroRange | fallocKeepSize:
	case fallocPunchHole:
		return syscall.EOPNOTSUPP // Linux: a hole is punched only with KEEP_SIZE
	default:
		return syscall.EOPNOTSUPP
	}
	if !h.write {
		return syscall.EBADF
	}
	end := off + size
	if size == 0 || end < off || end > 1<<62 {
		return syscall.EINVAL
	}
	if mode == fallocKeepSize {
		return 0
	}
	var attr fuse.AttrOut
	if st := h.n.Getattr(ctx, h, &attr); st != 0 {
		return st
	}
	if mode&(fallocPunchHole|fallocZeroRange) != 0 {
		if st := h.zero(ctx, off, min(end, attr.Size)); st != 0 {
			return st
		}
	}
	if end <= attr.Size || mode&fallocKeepSize != 0 {
		return 0
	}
	length := int64(end)
	in := &fuse.SetAttrIn{}
	in.Valid = fuse.FATTR_SIZE
	in.Size = uint64(length)
	return h.n.Setattr(ctx, h, in, &attr)
}

// zero writes zeros over [off, end) of the file.
func (h *handle) zero(ctx context.Context, off, end uint64) syscall.Errno {
	if off >= end {
		return 0
	}
	zeros := make([]byte, min(end-off, zeroStep))
	for off < end {
		n := min(end-off, uint64(len(zeros)))
		if _, st := h.Write(ctx, zeros[:n], int64(off)); st != 0 {
			return st
		}
		off += n
	}
	return 0
}
