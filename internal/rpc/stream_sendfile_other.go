//go:build !linux

package rpc

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// rawTCP returns nil: reads are sent with sendfile on Linux only.
func rawTCP(net.Conn) syscall.RawConn { return nil }

func sendFileFrames(syscall.RawConn, *os.File, int64, []byte, []int) error {
	return errors.New("sendfile is not used on this system")
}
