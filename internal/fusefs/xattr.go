package fusefs

import (
	"context"
	"errors"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/chunkfs/chunkfs"
)

// setxattr(2)'s flags.
const (
	xattrCreate  = 1
	xattrReplace = 2
)

var (
	_ = (gofs.NodeGetxattrer)((*node)(nil))
	_ = (gofs.NodeListxattrer)((*node)(nil))
	_ = (gofs.NodeSetxattrer)((*node)(nil))
	_ = (gofs.NodeRemovexattrer)((*node)(nil))
)

// xattrErrno is errno for the extended-attribute calls, whose limits
// have errnos of their own: a name or value over the limit is ERANGE
// (getxattr(2), setxattr(2)), a full attribute set ENOSPC.
func xattrErrno(err error) syscall.Errno {
	var e *chunkfs.Error
	if errors.As(err, &e) && e.Kind == chunkfs.KindTooLarge {
		return syscall.ERANGE
	}
	return errno(err)
}

// Getxattr answers the value's size when dest is empty, ERANGE when it
// is too small.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	v, err := n.m.b.GetXattr(cctx, callerOf(ctx), n.path(), attr)
	if err != nil {
		return 0, xattrErrno(err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Listxattr writes the names, each NUL-terminated.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	names, err := n.m.b.ListXattr(cctx, callerOf(ctx), n.path())
	if err != nil {
		return 0, xattrErrno(err)
	}
	size := 0
	for _, name := range names {
		size += len(name) + 1
	}
	if len(dest) < size {
		return uint32(size), syscall.ERANGE
	}
	at := 0
	for _, name := range names {
		at += copy(dest[at:], name)
		dest[at] = 0
		at++
	}
	return uint32(size), 0
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if flags&^(xattrCreate|xattrReplace) != 0 || flags == xattrCreate|xattrReplace {
		return syscall.EINVAL
	}
	cctx, cancel := n.m.mutation(ctx)
	defer cancel()
	if err := n.m.b.SetXattr(cctx, callerOf(ctx), n.path(), attr, data, flags); err != nil {
		return xattrErrno(err)
	}
	return 0
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	cctx, cancel := n.m.mutation(ctx)
	defer cancel()
	if err := n.m.b.RemoveXattr(cctx, callerOf(ctx), n.path(), attr); err != nil {
		return xattrErrno(err)
	}
	return 0
}
