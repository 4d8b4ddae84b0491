//go:build linux

package rpc

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

type iovec = syscall.Iovec

func iovecOf(b []byte) iovec {
	v := iovec{Base: &b[0]}
	v.SetLen(len(b))
	return v
}

// readv reads from the socket into iov's buffers in one call, waiting
// (under the connection's read deadline) until something can be read. The
// end of the stream is io.ErrUnexpectedEOF: an answer was cut off.
func readv(rc syscall.RawConn, iov []iovec) (int, error) {
	var n int
	var serr error
	err := rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.Syscall(syscall.SYS_READV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return false // wait until the socket is readable
			case e != 0:
				serr = os.NewSyscallError("readv", e)
			case r == 0:
				serr = io.ErrUnexpectedEOF
			}
			n = int(r)
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return n, nil
}
