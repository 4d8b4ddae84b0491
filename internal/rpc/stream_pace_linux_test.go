//go:build linux

package rpc

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSetPacing: setPacing sets the socket's pacing cap and lifts it,
// also through the Mux's connection.
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
	setPacing(&prefixConn{Conn: conn}, 125_000)
	if got := get(); got != 125_000 {
		t.Errorf("pacing %d B/s, want 125000", got)
	}
	setPacing(conn, 0)
	if got := get(); got < 1<<32-1 {
		t.Errorf("pacing %d B/s after lifting it, want unlimited", got)
	}
}
