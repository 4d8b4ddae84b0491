package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrsDistinctInRange: addresses are loopback, in the range, never
// the same twice, and one whose port is taken is skipped.
func TestAddrsDistinctInRange(t *testing.T) {
	held, err := net.Listen("tcp", addrAt(handed.Load())) // the port Addr tries first is taken
	if err != nil {
		t.Skip("the range's next port is in use by another process")
	}
	defer held.Close()
	seen := map[string]bool{held.Addr().String(): true}
	for range 50 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		if host != "127.0.0.1" || p < First || p >= First+Count {
			t.Fatalf("%s: not a loopback port in %d-%d", addr, First, First+Count-1)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
	}
	ln, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if seen[ln.Addr().String()] {
		t.Fatalf("Listen gave %s, handed out before", ln.Addr())
	}
}
