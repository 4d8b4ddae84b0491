//go:build linux

package rpc

import (
	"crypto/tls"
	"math"
	"net"

	"golang.org/x/sys/unix"
)

// pacedUnsent is the most data a paced socket holds unsent
// (TCP_NOTSENT_LOWAT): a write to it, sendfile's too, waits while it holds
// more. Without it the socket buffer, which grows to megabytes, took a
// whole 1 MiB clone piece at once: the read was answered, its pace lifted,
// and the piece left unpaced.
const pacedUnsent = 64 << 10

// setPacing caps the rate, in bytes a second, at which the kernel sends
// on conn's TCP socket (SO_MAX_PACING_RATE; 0 lifts the cap): paced data
// leaves at that rate whatever the application has queued, so other
// connections on the NIC keep the rest; while paced, the socket holds at
// most pacedUnsent unsent. It does nothing on a connection that is not
// TCP underneath.
func setPacing(conn net.Conn, rate int64) {
	tc := tcpUnder(conn)
	if tc == nil {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	v, unsent := uint64(math.MaxUint64), 0 // 0: the system's TCP_NOTSENT_LOWAT
	if rate > 0 {
		v, unsent = uint64(rate), pacedUnsent
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, v)
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, unsent)
	})
}

// tcpUnder returns the TCP connection under conn (behind the Mux, under
// TLS), or nil.
func tcpUnder(conn net.Conn) *net.TCPConn {
	for {
		switch c := conn.(type) {
		case *prefixConn:
			conn = c.Conn
		case *tls.Conn:
			conn = c.NetConn()
		case *net.TCPConn:
			return c
		default:
			return nil
		}
	}
}
