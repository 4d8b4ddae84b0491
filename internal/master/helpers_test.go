package master

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

var (
	root  = &pb.Caller{Uid: 0, Gids: []uint32{0}}
	alice = &pb.Caller{Uid: 1000, Gids: []uint32{100}}
	bob   = &pb.Caller{Uid: 1001, Gids: []uint32{101}}
)

// testMaster is a master served on loopback with a client to it.
type testMaster struct {
	t     testing.TB
	m     *Master
	cfg   Config
	clock *clock.Fake
	c     pb.MasterClient
	addr  string
	done  chan error
}

func testConfig(t testing.TB, dir string, clk *clock.Fake) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.ChunkSize = 1 << 20
	cfg.LeaseDuration = 10 * time.Second
	cfg.RPCTimeout = 5 * time.Second
	cfg.Clock = clk
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.TrashPeriod = 0 // tests that delete see garbage at once; trash_test.go turns it on
	return cfg
}

// startMaster opens a master on dir (a new temporary one when empty) with
// a fake clock, serves it, and closes it at cleanup.
func startMaster(t testing.TB, dir string, clk *clock.Fake) *testMaster {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if clk == nil {
		clk = clock.NewFake(time.Unix(1_700_000_000, 0))
	}
	return startWith(t, testConfig(t, dir, clk), clk)
}

// startMasterMin1 is startMaster with writes acknowledged on one replica
// (MinReplicas 1), for tests of other rules on clusters of one or two.
func startMasterMin1(t testing.TB, dir string, clk *clock.Fake) *testMaster {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if clk == nil {
		clk = clock.NewFake(time.Unix(1_700_000_000, 0))
	}
	cfg := testConfig(t, dir, clk)
	cfg.MinReplicas = 1
	return startWith(t, cfg, clk)
}

func startWith(t testing.TB, cfg Config, clk *clock.Fake) *testMaster {
	t.Helper()
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tm := &testMaster{t: t, m: m, cfg: cfg, clock: clk, addr: lis.Addr().String(), done: make(chan error, 1)}
	go func() { tm.done <- m.Serve(lis) }()
	cc, err := rpc.Dial(tm.addr)
	if err != nil {
		t.Fatal(err)
	}
	tm.c = pb.NewMasterClient(cc)
	mode := uint32(0o777)
	if _, err := tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: root, Path: "/", Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		tm.close()
	})
	return tm
}

// close checks the namespace and stops the master (idempotent).
func (tm *testMaster) close() {
	if tm.m == nil {
		return
	}
	if err := tm.m.Check(); err != nil {
		tm.t.Error(err)
	}
	if err := tm.m.Close(); err != nil {
		tm.t.Error(err)
	}
	if err := <-tm.done; err != nil {
		tm.t.Error(err)
	}
	tm.m = nil
}

var bg = context.Background()

func kindOf(err error) chunkfs.Kind { return chunkfs.KindOf(err) }

// fakeCS is a chunkserver's control service that records what the master
// tells it.
type fakeCS struct {
	pb.UnimplementedChunkServerServer
	id, addr string

	mu        sync.Mutex // guards the fields below
	versions  map[uint64]uint64
	leases    []*pb.LeaseRequest
	truncates []*pb.TruncateRequest
	copies    []*pb.CopyChunkRequest
	fail      bool
	truncFail bool // Truncate fails without cutting
	truncLost bool // Truncate cuts, then fails (the answer is lost)
	hang      bool // Clone hangs until its deadline (a target that stalls)
	leaseLost bool // Lease takes the version, then fails (the answer is lost)
	secFail   bool // Lease fails, taking nothing, when it names f a secondary
	// abort, when set, has Clone answer deadline exceeded this long
	// before the deadline the call carries (a target aborting at it).
	abort time.Duration
}

// Clone hangs until its deadline when f.hang, and is not implemented
// otherwise.
func (f *fakeCS) Clone(ctx context.Context, req *pb.CloneRequest) (*pb.CloneResponse, error) {
	f.mu.Lock()
	hang, abort := f.hang, f.abort
	f.mu.Unlock()
	if deadline, ok := ctx.Deadline(); ok && abort > 0 {
		time.Sleep(time.Until(deadline.Add(-abort)))
		return nil, chunkfs.E("clone", "", chunkfs.KindUnavailable, "aborted at the deadline: "+context.DeadlineExceeded.Error())
	}
	if !hang {
		return f.UnimplementedChunkServerServer.Clone(ctx, req)
	}
	<-ctx.Done()
	// A hung target answers nothing: the caller's own deadline ends the
	// call. (The handler's context, given the deadline the call carries,
	// can end a moment before the caller's: answering then made the
	// caller see an answer, not its deadline, once in a CI run.)
	time.Sleep(time.Second)
	return nil, chunkfs.E("clone", "", chunkfs.KindUnavailable, "stalled on purpose")
}

func (f *fakeCS) Lease(ctx context.Context, req *pb.LeaseRequest) (*pb.LeaseResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail || (f.secFail && req.LeaseMs == 0) {
		return nil, chunkfs.E("lease", "", chunkfs.KindUnavailable, "failing on purpose")
	}
	if _, ok := f.versions[req.Handle]; !ok && !req.Create {
		return nil, chunkfs.E("lease", "", chunkfs.KindNotExist, "no such chunk")
	}
	f.versions[req.Handle] = req.Version
	f.leases = append(f.leases, req)
	if f.leaseLost {
		return nil, chunkfs.E("lease", "", chunkfs.KindUnavailable, "took the version, but the answer is lost on purpose")
	}
	return &pb.LeaseResponse{}, nil
}

func (f *fakeCS) Truncate(ctx context.Context, req *pb.TruncateRequest) (*pb.TruncateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.truncFail {
		return nil, chunkfs.E("truncate", "", chunkfs.KindUnavailable, "failing on purpose")
	}
	f.versions[req.Handle] = req.Version
	f.truncates = append(f.truncates, req)
	if f.truncLost {
		return nil, chunkfs.E("truncate", "", chunkfs.KindUnavailable, "cut, but the answer is lost on purpose")
	}
	return &pb.TruncateResponse{}, nil
}

func (f *fakeCS) CopyChunk(ctx context.Context, req *pb.CopyChunkRequest) (*pb.CopyChunkResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, chunkfs.E("copy chunk", "", chunkfs.KindUnavailable, "failing on purpose")
	}
	if v, ok := f.versions[req.Handle]; !ok || v != req.Version {
		return nil, chunkfs.E("copy chunk", "", chunkfs.KindStale, "no such chunk at that version")
	}
	f.versions[req.NewHandle] = req.Version
	f.copies = append(f.copies, req)
	return &pb.CopyChunkResponse{}, nil
}

func (f *fakeCS) ChunkInfo(ctx context.Context, req *pb.ChunkInfoRequest) (*pb.ChunkInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.versions[req.Handle]
	if !ok {
		return nil, chunkfs.E("chunk info", "", chunkfs.KindNotExist, "no such chunk")
	}
	return &pb.ChunkInfoResponse{Version: v}, nil
}

func (f *fakeCS) truncateCalls() []*pb.TruncateRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.TruncateRequest(nil), f.truncates...)
}

func (f *fakeCS) leaseCalls() []*pb.LeaseRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.LeaseRequest(nil), f.leases...)
}

func (f *fakeCS) report() []*pb.ChunkReplica {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*pb.ChunkReplica
	for h, v := range f.versions {
		out = append(out, &pb.ChunkReplica{Handle: h, Version: v})
	}
	return out
}

// startCS serves a fake chunkserver on loopback and registers it.
func (tm *testMaster) startCS(id, rack string) *fakeCS {
	tm.t.Helper()
	f, _ := tm.startCSWith(id, rack)
	return f
}

// startCSResp is startCS returning the master's answer to the
// registration.
func (tm *testMaster) startCSResp(id, rack string) *pb.RegisterResponse {
	tm.t.Helper()
	_, resp := tm.startCSWith(id, rack)
	return resp
}

func (tm *testMaster) startCSWith(id, rack string) (*fakeCS, *pb.RegisterResponse) {
	tm.t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tm.t.Fatal(err)
	}
	f := &fakeCS{id: id, addr: lis.Addr().String(), versions: make(map[uint64]uint64)}
	srv := rpc.NewServer(slog.New(slog.DiscardHandler))
	pb.RegisterChunkServerServer(srv, f)
	go srv.Serve(lis)
	tm.t.Cleanup(srv.Stop)
	return f, tm.register(f, rack)
}

func (tm *testMaster) register(f *fakeCS, rack string) *pb.RegisterResponse {
	tm.t.Helper()
	return tm.registerWith(f, rack, f.report())
}

// registerWith registers f with a full report built earlier.
func (tm *testMaster) registerWith(f *fakeCS, rack string, report []*pb.ChunkReplica) *pb.RegisterResponse {
	tm.t.Helper()
	resp, err := tm.c.Register(bg, &pb.RegisterRequest{Id: f.id, Addr: f.addr, Rack: rack, Capacity: 1 << 40, Used: 1 << 30, Free: 1 << 39, Chunks: report})
	if err != nil {
		tm.t.Fatal(err)
	}
	return resp
}

func (tm *testMaster) beat(f *fakeCS, extend ...uint64) *pb.HeartbeatResponse {
	tm.t.Helper()
	return tm.beatWith(f, f.report(), extend...)
}

// beatWith sends a heartbeat from f whose sample was taken earlier.
func (tm *testMaster) beatWith(f *fakeCS, sample []*pb.ChunkReplica, extend ...uint64) *pb.HeartbeatResponse {
	tm.t.Helper()
	resp, err := tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Used: 1 << 30, Free: 1 << 39, ExtendLeases: extend, Sample: sample})
	if err != nil {
		tm.t.Fatal(err)
	}
	return resp
}

func (tm *testMaster) create(c *pb.Caller, p string) *pb.FileInfo {
	tm.t.Helper()
	resp, err := tm.c.Create(bg, &pb.CreateRequest{Caller: c, Path: p, Mode: 0o644})
	if err != nil {
		tm.t.Fatal(err)
	}
	return resp.Info
}
