//go:build linux

package rpc

import (
	"crypto/tls"
	"math"
	"net"

	"golang.org/x/sys/unix"
)

// setPacing caps the rate, in bytes a second, at which the kernel sends
// on conn's TCP socket (SO_MAX_PACING_RATE; 0 lifts the cap): paced data
// leaves at that rate whatever the application has queued, so other
// connections on the NIC keep the rest. It does nothing on a connection
// that is not TCP underneath.
func setPacing(conn net.Conn, rate int64) {
	tc := tcpUnder(conn)
	if tc == nil {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	v := uint64(math.MaxUint64)
	if rate > 0 {
		v = uint64(rate)
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, v)
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
