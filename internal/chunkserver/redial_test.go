package chunkserver

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/loopback"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestRegistersOnTheFirstHeartbeatAfterMasterReturns: a chunkserver whose
// master was down (its register calls refused) registers at the first
// heartbeat tick once the master listens again, not after gRPC's
// reconnection back-off (a second and more, growing) that the old
// connection would wait; the fake clock does not move meanwhile, so only
// that one tick can register it.
func TestRegistersOnTheFirstHeartbeatAfterMasterReturns(t *testing.T) {
	addr, err := loopback.Addr() // nothing listens: calls are refused
	if err != nil {
		t.Fatal(err)
	}

	clk := clock.NewFake(time.Unix(1e9, 0))
	cfg := DefaultConfig()
	cfg.Dirs = []string{t.TempDir()}
	cfg.Masters = []string{addr}
	cfg.Rack = "r1"
	cfg.Clock = clk
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.CloneRate = 0
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(sl)

	// Three refused attempts: the first at start, two more on ticks.
	for range 2 {
		waitRefused(t, addr)
		clk.Advance(cfg.HeartbeatInterval)
	}
	waitRefused(t, addr)

	m := startFakeMasterAt(t, addr)
	clk.Advance(cfg.HeartbeatInterval)
	m.wait(t, "register")
}

// waitRefused gives the heartbeat loop time to make its attempt: it
// returns once a dial of addr is refused (as the server's was) and a
// moment has passed.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s answers", addr)
	}
	time.Sleep(50 * time.Millisecond)
}

// startFakeMasterAt is startFakeMaster on a given address.
func startFakeMasterAt(t testing.TB, addr string) *fakeMaster {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMaster{addr: addr, registered: map[string]*pb.RegisterRequest{}, events: make(chan string, 1000)}
	gs := rpc.NewServer(slog.New(slog.DiscardHandler))
	pb.RegisterMasterServer(gs, m)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return m
}
