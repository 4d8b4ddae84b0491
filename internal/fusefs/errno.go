package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/chunkfs/chunkfs"
)

// errnos is the one table that turns an error Kind into what the kernel
// hands to the process. Kinds a caller cannot act on (a stale replica, a
// chunk that filled up, a master that stopped being leader) have already
// been retried by the client; what is left of them is an I/O error.
var errnos = map[chunkfs.Kind]syscall.Errno{
	chunkfs.KindOther:        syscall.EIO,
	chunkfs.KindInvalid:      syscall.EINVAL,
	chunkfs.KindNotExist:     syscall.ENOENT,
	chunkfs.KindExist:        syscall.EEXIST,
	chunkfs.KindPermission:   syscall.EACCES,
	chunkfs.KindNotEmpty:     syscall.ENOTEMPTY,
	chunkfs.KindNotDir:       syscall.ENOTDIR,
	chunkfs.KindIsDir:        syscall.EISDIR,
	chunkfs.KindUnavailable:  syscall.EIO,
	chunkfs.KindChecksum:     syscall.EIO,
	chunkfs.KindStale:        syscall.EIO,
	chunkfs.KindNoSpace:      syscall.ENOSPC,
	chunkfs.KindNotSupported: syscall.ENOTSUP,
	chunkfs.KindChunkFull:    syscall.EIO,
	chunkfs.KindNotPrimary:   syscall.EIO,
	chunkfs.KindTooLarge:     syscall.EFBIG,
	chunkfs.KindNotLeader:    syscall.EIO,
	chunkfs.KindNoAttr:       syscall.ENODATA,
}

// errno returns the errno for err: 0 for nil, the table's entry for a
// *chunkfs.Error, EIO for a deadline or anything else.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) {
		// The kernel interrupted the request (a signal reached the
		// caller, FUSE_INTERRUPT): EINTR lets the caller retry, as
		// Go's os package and SA_RESTART callers do; EIO would be a
		// failure the cluster never had.
		return syscall.EINTR
	}
	var e *chunkfs.Error
	if !errors.As(err, &e) {
		return syscall.EIO
	}
	if n, ok := errnos[e.Kind]; ok {
		return n
	}
	return syscall.EIO
}
