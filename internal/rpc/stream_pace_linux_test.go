//go:build linux

package rpc

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSetPacing: setPacing sets the socket's pacing cap, with a bound on
// the data it holds unsent, and lifts both, also through the Mux's
// connection.
func TestSetPacing(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	get := func() uint64 {
		var v uint64
		rc, _ := conn.(*net.TCPConn).SyscallConn()
		rc.Control(func(fd uintptr) {
			n, err := unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE)
			if err != nil {
				t.Fatal(err)
			}
			v = n
		})
		return v
	}
	unsent := func() int {
		var v int
		rc, _ := conn.(*net.TCPConn).SyscallConn()
		rc.Control(func(fd uintptr) {
			n, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
			if err != nil {
				t.Fatal(err)
			}
			v = n
		})
		return v
	}
	setPacing(&prefixConn{Conn: conn}, 125_000)
	if got := get(); got != 125_000 {
		t.Errorf("pacing %d B/s, want 125000", got)
	}
	if got := unsent(); got != pacedUnsent {
		t.Errorf("paced socket holds up to %d bytes unsent, want %d", got, pacedUnsent)
	}
	setPacing(conn, 0)
	if got := get(); got < 1<<32-1 {
		t.Errorf("pacing %d B/s after lifting it, want unlimited", got)
	}
	if got := unsent(); got != 0 {
		t.Errorf("unsent bound %d after lifting the pace, want 0 (the system's)", got)
	}
}
