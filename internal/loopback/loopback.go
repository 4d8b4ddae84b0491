// Package loopback hands out addresses on 127.0.0.1 for servers that
// tests and in-process clusters stop and start again on the same address.
//
// Every port is below the kernel's ephemeral range (ip_local_port_range
// starts at 32768), in [First, First+Count): no listener binding port 0
// and no outgoing connection, of this or another process, is given it
// while its server is down. Within a process no port is handed out twice:
// the kernel may give a port closed a moment ago to the next listener,
// and two servers must not be told the same address.
package loopback

import (
	"fmt"
	"net"
	"os"
	"sync/atomic"
)

// The range ports are handed out from.
const (
	First = 20000
	Count = 12000
)

// handed counts the ports this process has handed out. It is package
// state because what it guards is: the process's share of the machine's
// ports, whoever in the process asks.
var handed atomic.Uint32

// Listen listens on a loopback port of the range that this process has
// not handed out before.
func Listen() (net.Listener, error) {
	var err error
	for range Count {
		var ln net.Listener
		if ln, err = net.Listen("tcp", take()); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("loopback: no free port in %d-%d: %w", First, First+Count-1, err)
}

// Addr returns a loopback address of the range, free just now and not
// handed out before by this process, for a server started later (a
// group whose members must all know each other's addresses first).
func Addr() (string, error) {
	ln, err := Listen()
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// take is the next address of the range.
func take() string { return addrAt(handed.Add(1) - 1) }

// addrAt is the address handed out n-th. Each process starts at a place
// of its own (from its process ID), so that processes running side by
// side (go test runs packages at once) walk the range apart.
func addrAt(n uint32) string {
	start := uint32(os.Getpid()) * 7919 // a prime: neighbouring IDs start far apart
	return fmt.Sprintf("127.0.0.1:%d", First+int((start+n)%Count))
}
