//go:build linux

package rpc

import (
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
)

// rawTCP returns the raw socket under conn when it is a TCP connection
// (possibly behind the Mux), for sendFileFrames; else nil.
func rawTCP(conn net.Conn) syscall.RawConn {
	if pc, ok := conn.(*prefixConn); ok {
		conn = pc.Conn
	}
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// sendFileFrames sends data frames whose headers are hdrs (frameHeaderSize
// bytes each) and whose payloads are the consecutive ranges of f from off
// with lengths lens: each header with MSG_MORE, so that it leaves in one
// segment with its payload, and each payload with sendfile, which hands
// the page-cache pages to the socket instead of copying them. The
// connection's write deadline applies.
func sendFileFrames(rc syscall.RawConn, f *os.File, off int64, hdrs []byte, lens []int) error {
	infd := int(f.Fd())
	i, sent := 0, 0 // the frame being sent, and how much of it, header first
	var serr error
	err := rc.Write(func(fd uintptr) bool {
		for i < len(lens) {
			if sent < frameHeaderSize {
				n, err := syscall.SendmsgN(int(fd), hdrs[i*frameHeaderSize+sent:(i+1)*frameHeaderSize], nil, nil, syscall.MSG_MORE)
				switch {
				case err == syscall.EINTR:
					continue
				case err == syscall.EAGAIN:
					return false // wait until the socket is writable
				case err != nil:
					serr = os.NewSyscallError("sendmsg", err)
					return true
				}
				sent += n
				continue
			}
			pos := off + int64(sent-frameHeaderSize)
			n, err := syscall.Sendfile(int(fd), infd, &pos, lens[i]-(sent-frameHeaderSize))
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return false
			case err != nil:
				serr = os.NewSyscallError("sendfile", err)
				return true
			case n <= 0:
				serr = io.ErrUnexpectedEOF // the file was cut short meanwhile
				return true
			}
			sent += n
			if sent == frameHeaderSize+lens[i] {
				off += int64(lens[i])
				i, sent = i+1, 0
			}
		}
		return true
	})
	runtime.KeepAlive(f)
	if err != nil {
		return err
	}
	return serr
}
