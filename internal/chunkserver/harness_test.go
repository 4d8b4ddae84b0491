package chunkserver

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// fakeMaster records what chunkservers tell it and answers heartbeats with
// whatever the test queued.
type fakeMaster struct {
	pb.UnimplementedMasterServer
	addr string

	mu         sync.Mutex // guards the fields below
	registered map[string]*pb.RegisterRequest
	beats      []*pb.HeartbeatRequest
	corrupt    []*pb.ReportCorruptRequest
	garbage    []uint64       // handed out with the next heartbeat
	reregister bool           // asked with the next heartbeat
	extend     []uint64       // leases extended with the next heartbeat
	keys       []*pb.TokenKey // token keys of every answer
	failBeats  int            // heartbeats to refuse (as unavailable) from now
	failRegs   int            // registrations to refuse (as unavailable) from now
	now        func() time.Time
	cluster    string      // the cluster ID answered to registrations
	regGarbage []uint64    // garbage answered to registrations
	regTimes   []time.Time // when (by now) each registration, refused or not, arrived
	events     chan string
}

func startFakeMaster(t testing.TB) *fakeMaster {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMaster{addr: lis.Addr().String(), registered: map[string]*pb.RegisterRequest{}, events: make(chan string, 1000)}
	gs := rpc.NewServer(slog.New(slog.DiscardHandler))
	pb.RegisterMasterServer(gs, m)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return m
}

func (m *fakeMaster) event(e string) {
	select {
	case m.events <- e:
	default:
	}
}

// wait blocks until an event e arrives (or fails the test after 10 s).
func (m *fakeMaster) wait(t testing.TB, e string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-m.events:
			if got == e {
				return
			}
		case <-timeout:
			t.Fatalf("fake master: no %q event", e)
		}
	}
}

func (m *fakeMaster) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	m.mu.Lock()
	if m.now != nil {
		m.regTimes = append(m.regTimes, m.now())
	}
	if m.failRegs > 0 {
		m.failRegs--
		m.mu.Unlock()
		m.event("register refused")
		return nil, chunkfs.E("register", m.addr, chunkfs.KindUnavailable, "refused by the test")
	}
	m.registered[req.Addr] = req
	resp := &pb.RegisterResponse{HeartbeatIntervalMs: 1000, TokenKeys: m.keys, ClusterId: m.cluster, Garbage: m.regGarbage}
	m.mu.Unlock()
	m.event("register")
	return resp, nil
}

func (m *fakeMaster) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	m.mu.Lock()
	if m.failBeats > 0 {
		m.failBeats--
		m.mu.Unlock()
		m.event("heartbeat refused")
		return nil, chunkfs.E("heartbeat", m.addr, chunkfs.KindUnavailable, "refused by the test")
	}
	m.beats = append(m.beats, req)
	resp := &pb.HeartbeatResponse{Garbage: m.garbage, Reregister: m.reregister, Extended: m.extend, LeaseMs: 60000, TokenKeys: m.keys}
	m.garbage, m.reregister, m.extend = nil, false, nil
	m.mu.Unlock()
	m.event("heartbeat")
	return resp, nil
}

func (m *fakeMaster) ReportCorrupt(ctx context.Context, req *pb.ReportCorruptRequest) (*pb.ReportCorruptResponse, error) {
	m.mu.Lock()
	m.corrupt = append(m.corrupt, req)
	m.mu.Unlock()
	m.event("corrupt")
	return &pb.ReportCorruptResponse{}, nil
}

func (m *fakeMaster) lastBeat() *pb.HeartbeatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.beats[len(m.beats)-1]
}

// testCluster is a fake master and n real chunkservers on loopback sharing
// a fake clock; the test plays the master's part in granting leases.
type testCluster struct {
	t       testing.TB
	clock   *clock.Fake
	master  *fakeMaster
	servers []*Server
	addrs   []string
	dirs    []string
	pool    *rpc.Pool
	data    *rpc.DataClient
	scrub   time.Duration // ScrubInterval of servers started from now on
	tune    func(*Config) // adjusts the config of servers started from now on
	nextID  chunkfs.DataID
	mu      sync.Mutex // guards nextID
}

func newTestCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	return newTestClusterIn(t, dirs)
}

// newTestClusterIn starts one server on each data directory.
func newTestClusterIn(t testing.TB, dirs []string) *testCluster {
	return newTunedCluster(t, dirs, nil)
}

// newTunedCluster starts one server on each data directory, each with
// its configuration adjusted by tune (nil: the defaults of start).
func newTunedCluster(t testing.TB, dirs []string, tune func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, clock: clock.NewFake(time.Unix(1e9, 0)), master: startFakeMaster(t), pool: rpc.NewPool(), data: rpc.NewDataClient(), dirs: dirs, tune: tune}
	tc.master.now = tc.clock.Now
	n := len(dirs)
	for i := range n {
		tc.start(i)
	}
	for range n {
		tc.master.wait(t, "register")
	}
	t.Cleanup(func() {
		for _, s := range tc.servers {
			s.Close()
		}
		tc.pool.Close()
		tc.data.Close()
	})
	return tc
}

// start starts server i on a fresh loopback port.
func (tc *testCluster) start(i int) {
	cfg := DefaultConfig()
	cfg.Dirs = []string{tc.dirs[i]}
	cfg.Masters = []string{tc.master.addr}
	cfg.Rack = "r1"
	cfg.Clock = tc.clock
	cfg.MaxChunkSize = 64 << 20
	cfg.ScrubInterval = tc.scrub
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.CloneRate = 0 // the fake clock does not move by itself
	if tc.tune != nil {
		tc.tune(&cfg)
	}
	s, err := Open(cfg)
	if err != nil {
		tc.t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tc.t.Fatal(err)
	}
	go s.Serve(lis)
	if i < len(tc.servers) {
		tc.servers[i], tc.addrs[i] = s, lis.Addr().String()
	} else {
		tc.servers, tc.addrs = append(tc.servers, s), append(tc.addrs, lis.Addr().String())
	}
}

func (tc *testCluster) cs(i int) pb.ChunkServerClient {
	c, err := tc.pool.ChunkServer(tc.addrs[i])
	if err != nil {
		tc.t.Fatal(err)
	}
	return c
}

// grant creates (or re-versions) chunk h at v on every server, server 0
// primary.
func (tc *testCluster) grant(h chunkfs.Handle, v chunkfs.Version) {
	tc.t.Helper()
	for i := range tc.servers {
		ms := int64(0)
		if i == 0 {
			ms = 60000
		}
		if _, err := tc.cs(i).Lease(context.Background(), &pb.LeaseRequest{Handle: uint64(h), Version: uint64(v), Create: true, LeaseMs: ms}); err != nil {
			tc.t.Fatalf("lease on %d: %v", i, err)
		}
	}
}

func (tc *testCluster) newID() chunkfs.DataID {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.nextID++
	return tc.nextID
}

// push pushes data along every server (primary first) under a new ID.
func (tc *testCluster) push(data []byte) (chunkfs.DataID, error) {
	id := tc.newID()
	return id, tc.data.Push(context.Background(), tc.addrs, id, data)
}

// write pushes data and has the primary write it at off.
func (tc *testCluster) write(h chunkfs.Handle, v chunkfs.Version, off int64, data []byte) error {
	id, err := tc.push(data)
	if err != nil {
		return err
	}
	_, err = tc.cs(0).Write(context.Background(), &pb.WriteRequest{Handle: uint64(h), Version: uint64(v), Offset: off, DataId: uint64(id), Length: int64(len(data)), Secondaries: tc.addrs[1:]})
	return err
}

// appendRecord pushes data and has the primary append it.
func (tc *testCluster) appendRecord(h chunkfs.Handle, v chunkfs.Version, chunkSize int64, data []byte) (int64, error) {
	id, err := tc.push(data)
	if err != nil {
		return 0, err
	}
	resp, err := tc.cs(0).Append(context.Background(), &pb.AppendRequest{Handle: uint64(h), Version: uint64(v), DataId: uint64(id), Length: int64(len(data)), Secondaries: tc.addrs[1:], ChunkSize: chunkSize})
	if err != nil {
		return 0, err
	}
	return resp.Offset, nil
}

// replica reads the whole of chunk h from server i.
func (tc *testCluster) replica(i int, h chunkfs.Handle, v chunkfs.Version) []byte {
	tc.t.Helper()
	info, err := tc.cs(i).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: uint64(h)})
	if err != nil {
		tc.t.Fatalf("chunk info on %d: %v", i, err)
	}
	p := make([]byte, info.Length)
	n, err := tc.data.Read(context.Background(), tc.addrs[i], h, v, 0, p)
	if err != nil || n != len(p) {
		tc.t.Fatalf("read replica %d: %d of %d bytes, %v", i, n, len(p), err)
	}
	return p
}
