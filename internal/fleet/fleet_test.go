package fleet

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const beat = 50 * time.Millisecond

// testMaster is a real master on loopback whose address survives restarts.
type testMaster struct {
	t    *testing.T
	cfg  master.Config
	addr string
	m    *master.Master
	done chan error
}

func startMaster(t *testing.T) *testMaster {
	cfg := master.DefaultConfig()
	cfg.Dir, cfg.NoSync, cfg.Logger = t.TempDir(), true, quiet
	cfg.HeartbeatInterval, cfg.DeadAfter = beat, 20*beat
	tm := &testMaster{t: t, cfg: cfg, addr: "127.0.0.1:0"}
	tm.open()
	t.Cleanup(tm.close)
	return tm
}

func (tm *testMaster) open() {
	m, err := master.Open(tm.cfg)
	if err != nil {
		tm.t.Fatal(err)
	}
	lis, err := net.Listen("tcp", tm.addr)
	if err != nil {
		m.Close()
		tm.t.Fatal(err)
	}
	tm.m, tm.addr, tm.done = m, lis.Addr().String(), make(chan error, 1)
	go func() { tm.done <- m.Serve(lis) }()
}

func (tm *testMaster) close() {
	if tm.m != nil {
		tm.m.Close()
		<-tm.done
		tm.m = nil
	}
}

func startFleet(t *testing.T, addr string, n int) *Fleet {
	cfg := DefaultConfig()
	cfg.Master, cfg.Servers, cfg.HeartbeatInterval, cfg.Logger = addr, n, beat, quiet
	cfg.ServersPerConn = 2
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// eventually polls cond until it holds or a minute passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

var root = &pb.Caller{Uid: 0, Gids: []uint32{0}}

// located returns the replicas the master names for chunk 0 of p.
func located(t *testing.T, m *master.Master, p string) []string {
	resp, err := m.Server().GetChunks(context.Background(), &pb.GetChunksRequest{Caller: root, Path: p})
	if err != nil || len(resp.Chunks) == 0 {
		return nil
	}
	return resp.Chunks[0].Replicas
}

// TestFleetAgainstMaster: simulated servers take a new chunk's lease
// calls, report it, and bring its locations back to a restarted master.
func TestFleetAgainstMaster(t *testing.T) {
	tm := startMaster(t)
	f := startFleet(t, tm.addr, 4)
	f.Start()
	if err := f.Hold(0, nil); err == nil {
		t.Error("Hold after Start succeeded")
	}
	ctx := context.Background()
	eventually(t, "out of safe mode", func() bool {
		r, err := tm.m.Server().ClusterReport(ctx, &pb.ClusterReportRequest{})
		return err == nil && !r.SafeMode && len(r.Servers) == 4
	})
	if _, err := tm.m.Server().Create(ctx, &pb.CreateRequest{Caller: root, Path: "/f", Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	pw, err := tm.m.Server().PrepareWrite(ctx, &pb.PrepareWriteRequest{Caller: root, Path: "/f", Index: 0})
	if err != nil {
		t.Fatal(err)
	}
	ch := pw.Chunk
	if len(ch.Replicas) != 3 || ch.Primary == "" {
		t.Fatalf("chunk placed on %v, primary %q; want 3 replicas and a primary", ch.Replicas, ch.Primary)
	}
	if err := f.Wrote(ch.Replicas, chunkfs.Handle(ch.Handle), 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Wrote([]string{"127.0.0.1:1"}, chunkfs.Handle(ch.Handle), 1); err == nil {
		t.Error("Wrote to an address not of the fleet succeeded")
	}
	pool := rpc.NewPool()
	defer pool.Close()
	cs, err := pool.ChunkServer(ch.Primary)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cs.ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: ch.Handle})
	if err != nil || info.Version != ch.Version || info.Length != 4096 || !info.Primary {
		t.Fatalf("primary's ChunkInfo: %v, %v; want version %d, 4096 bytes, primary", info, err, ch.Version)
	}
	if _, err := cs.Write(ctx, &pb.WriteRequest{Handle: ch.Handle, Version: ch.Version}); chunkfs.KindOf(err) != chunkfs.KindNotSupported {
		t.Errorf("Write to a simulated server: %v; want KindNotSupported", err)
	}
	if _, err := cs.Lease(ctx, &pb.LeaseRequest{Handle: ch.Handle, Version: ch.Version - 1}); chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Errorf("Lease at an older version: %v; want KindStale", err)
	}

	tm.close()
	eventually(t, "heartbeats fail while the master is down", func() bool { return f.Stats().Failed > 0 })
	regs := f.Stats().Registrations
	tm.open()
	eventually(t, "every server registers again", func() bool { return f.Stats().Registrations >= regs+4 })
	eventually(t, "the chunk's three replicas located again", func() bool { return len(located(t, tm.m, "/f")) == 3 })
	if got := f.Stats().Replicas; got != 3 {
		t.Errorf("fleet holds %d replicas, want 3", got)
	}
}

// TestFleetGarbage: replicas the master does not know are deleted when
// the servers register, and the fleet reports how many are left.
func TestFleetGarbage(t *testing.T) {
	tm := startMaster(t)
	f := startFleet(t, tm.addr, 3)
	for i := range 3 {
		if err := f.Hold(i, []Replica{{Handle: 1 << 40, Version: 1, Length: 10}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Hold(7, nil); err == nil {
		t.Error("Hold on a server that does not exist succeeded")
	}
	f.Start()
	eventually(t, "garbage deleted", func() bool { return f.Stats().Replicas == 0 })
	eventually(t, "heartbeats answered", func() bool { return f.Stats().Heartbeats > 0 })
}

func TestConfigValidate(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no master":      func(c *Config) { c.Master = "" },
		"no servers":     func(c *Config) { c.Servers = 0 },
		"too many":       func(c *Config) { c.Servers = MaxServers + 1 },
		"no capacity":    func(c *Config) { c.Capacity = 0 },
		"no interval":    func(c *Config) { c.HeartbeatInterval = 0 },
		"no report":      func(c *Config) { c.ReportSize = 0 },
		"no conn share":  func(c *Config) { c.ServersPerConn = 0 },
		"no clock":       func(c *Config) { c.Clock = nil },
		"no rpc timeout": func(c *Config) { c.RPCTimeout = 0 },
	} {
		cfg := DefaultConfig()
		cfg.Master, cfg.Servers = "127.0.0.1:1", 1
		mut(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestFleetPause: paused servers send no heartbeat at their ticks, and
// resume after. The fleet runs on a fake clock: only ticks move it.
func TestFleetPause(t *testing.T) {
	tm := startMaster(t)
	cfg := DefaultConfig()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg.Master, cfg.Servers, cfg.HeartbeatInterval, cfg.Logger, cfg.Clock = tm.addr, 3, beat, quiet, clk
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	f.Start()
	tick := func(until func() bool) {
		for deadline := time.Now().Add(time.Minute); !until(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the fleet did not get there")
			}
			clk.Advance(beat)
		}
	}
	tick(func() bool { return f.Stats().Heartbeats >= 6 })
	f.Pause(true)
	// A heartbeat of a tick before the pause may still be answered: wait
	// for the count to settle with the clock still.
	n := f.Stats().Heartbeats
	for settled := 0; settled < 20; time.Sleep(5 * time.Millisecond) {
		if m := f.Stats().Heartbeats; m != n {
			n, settled = m, 0
		} else {
			settled++
		}
	}
	for range 10 {
		clk.Advance(beat)
		time.Sleep(5 * time.Millisecond)
	}
	if got := f.Stats().Heartbeats; got != n {
		t.Fatalf("%d heartbeats answered at ticks while paused", got-n)
	}
	f.Pause(false)
	tick(func() bool { return f.Stats().Heartbeats >= n+3 })
}
