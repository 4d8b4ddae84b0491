//go:build !linux

package rpc

import "net"

// setPacing does nothing where the kernel's pacing is not used.
func setPacing(net.Conn, int64) {}
