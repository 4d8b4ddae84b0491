//go:build !linux

package rpc

import (
	"errors"
	"syscall"
)

type iovec struct{}

func iovecOf([]byte) iovec { return iovec{} }

// readv is not used where rawTCP returns nil.
func readv(syscall.RawConn, []iovec) (int, error) {
	return 0, errors.New("scatter reads are not used on this system")
}
