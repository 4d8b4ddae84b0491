package master

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

func (tm *testMaster) prepare(c *pb.Caller, p string, index int64, appnd bool) *pb.PrepareWriteResponse {
	tm.t.Helper()
	resp, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: c, Path: p, Index: index, Append: appnd})
	if err != nil {
		tm.t.Fatalf("prepare write %s[%d]: %v", p, index, err)
	}
	return resp
}

func primaries(calls []*pb.LeaseRequest) int {
	n := 0
	for _, c := range calls {
		if c.LeaseMs > 0 {
			n++
		}
	}
	return n
}

func TestPrepareWriteAllocatesAndLeases(t *testing.T) {
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("cs0", "r0"), tm.startCS("cs1", "r1"), tm.startCS("cs2", "r2"), tm.startCS("cs3", "r0")}
	tm.create(alice, "/f")
	pw := tm.prepare(alice, "/f", 0, false)
	ch := pw.Chunk
	if ch.Handle == 0 || ch.Version != 1 || len(ch.Replicas) != 3 || ch.Primary != ch.Replicas[0] || ch.LeaseExpiryMs <= 0 || pw.ChunkSize != 1<<20 {
		t.Fatalf("first prepare: %+v", pw)
	}
	var calls []*pb.LeaseRequest
	for _, f := range cs {
		calls = append(calls, f.leaseCalls()...)
	}
	if len(calls) != 3 || primaries(calls) != 1 || !calls[0].Create {
		t.Fatalf("lease calls: %v", calls)
	}
	// The lease holds: a second prepare makes no calls.
	pw2 := tm.prepare(alice, "/f", 0, false)
	if pw2.Chunk.Primary != ch.Primary || pw2.Chunk.Version != 1 {
		t.Errorf("second prepare: %+v", pw2.Chunk)
	}
	// Readers see the same chunk.
	gc, err := tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: "/f"})
	if err != nil || len(gc.Chunks) != 1 || gc.Chunks[0].Handle != ch.Handle || len(gc.Chunks[0].Replicas) != 3 {
		t.Fatalf("get chunks: %v %v", gc, err)
	}
	// Other users may not write.
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: bob, Path: "/f"}); kindOf(err) != chunkfs.KindPermission {
		t.Errorf("bob prepares: %v", err)
	}
	// Heartbeats extend the lease; once it lapses, a new one bumps the version.
	var holder *fakeCS
	for _, f := range cs {
		if f.addr == ch.Primary {
			holder = f
		}
	}
	beatAll := func() {
		for _, f := range cs {
			if f != holder {
				tm.beat(f)
			}
		}
	}
	tm.clock.Advance(8 * time.Second)
	beatAll()
	if hb := tm.beat(holder, ch.Handle); len(hb.Extended) != 1 || hb.LeaseMs != 10000 {
		t.Errorf("extend: %+v", hb)
	}
	tm.clock.Advance(8 * time.Second)
	beatAll()
	if pw := tm.prepare(alice, "/f", 0, false); pw.Chunk.Version != 1 {
		t.Errorf("extended lease was replaced: version %d", pw.Chunk.Version)
	}
	tm.clock.Advance(20 * time.Second)
	beatAll()
	tm.beat(holder)
	pw3 := tm.prepare(alice, "/f", 0, false)
	if pw3.Chunk.Version != 2 || len(pw3.Chunk.Replicas) != 3 {
		t.Fatalf("new lease: %+v", pw3.Chunk)
	}
	var bumped []*pb.LeaseRequest
	for _, f := range cs {
		for _, c := range f.leaseCalls() {
			if c.Version == 2 {
				bumped = append(bumped, c)
			}
		}
	}
	if len(bumped) != 3 || primaries(bumped) != 1 || bumped[0].Create {
		t.Errorf("version-2 lease calls: %v", bumped)
	}
	cl, err := tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: "/f", Length: 1000, Touch: true})
	if err != nil || cl.Length != 1000 {
		t.Errorf("commit length: %v %v", cl, err)
	}
}

func TestAppendAllocationIsIdempotent(t *testing.T) {
	tm := startMaster(t, "", nil)
	for i := range 3 {
		tm.startCS(string(rune('a'+i)), "")
	}
	tm.create(alice, "/log")
	var wg sync.WaitGroup
	handles := make([]uint64, 16)
	for i := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/log", Index: 0, Append: true})
			if err != nil {
				t.Error(err)
				return
			}
			handles[i] = resp.Chunk.Handle
		}()
	}
	wg.Wait()
	for _, h := range handles {
		if h != handles[0] {
			t.Fatalf("appenders got different chunks: %v", handles)
		}
	}
	// The next chunk; then an index behind the last is stale.
	next := tm.prepare(alice, "/log", 1, true)
	if next.Chunk.Handle == handles[0] || next.Chunk.Index != 1 {
		t.Errorf("next chunk: %+v", next.Chunk)
	}
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/log", Index: 0, Append: true}); kindOf(err) != chunkfs.KindStale {
		t.Errorf("append to an old chunk: %v", err)
	}
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/log", Index: 5, Append: true}); kindOf(err) != chunkfs.KindStale {
		t.Errorf("append beyond the next chunk: %v", err)
	}
}

func TestRegisterStaleGarbageAndDeath(t *testing.T) {
	tm := startMasterMin1(t, "", nil)
	a, b := tm.startCS("a", "r0"), tm.startCS("b", "r1")
	tm.create(alice, "/f")
	h := tm.prepare(alice, "/f", 0, false).Chunk.Handle
	tm.clock.Advance(20 * time.Second)
	tm.beat(a)
	// b misses the new version: make it fail the lease call.
	b.mu.Lock()
	b.fail = true
	b.mu.Unlock()
	tm.beat(b)
	// If b was chosen primary, the first attempt fails and the client
	// retries; the retry fences with a higher version.
	pw, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f"})
	if err != nil {
		pw = tm.prepare(alice, "/f", 0, false)
	}
	if pw.Chunk.Version < 2 || len(pw.Chunk.Replicas) != 1 || pw.Chunk.Primary != a.addr {
		t.Fatalf("after failed replica: %+v", pw.Chunk)
	}
	// A sample from before a Lease call does not condemn a counted replica;
	// the replica whose call failed is garbage.
	a.mu.Lock()
	a.versions[h] = 1
	a.mu.Unlock()
	if hb := tm.beat(a); len(hb.Garbage) != 0 {
		t.Errorf("outdated sample from a current replica: %+v", hb)
	}
	a.mu.Lock()
	a.versions[h] = 2
	a.mu.Unlock()
	if hb := tm.beat(b); len(hb.Garbage) != 1 || hb.Garbage[0] != h {
		t.Errorf("stale replica's sample: %+v", hb)
	}
	b.mu.Lock()
	b.fail = false
	b.versions[999999] = 1 // a chunk the master never made
	b.mu.Unlock()
	reg := tm.register(b, "r1")
	if len(reg.Stale) != 1 || reg.Stale[0] != h || len(reg.Garbage) != 1 || reg.Garbage[0] != 999999 || reg.HeartbeatIntervalMs != 3000 {
		t.Errorf("register: %+v", reg)
	}
	// Deleting the file makes its chunk garbage for the holder.
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/f"}); err != nil {
		t.Fatal(err)
	}
	if hb := tm.beat(a); len(hb.Garbage) != 1 || hb.Garbage[0] != h {
		t.Errorf("garbage after delete: %+v", hb)
	}
	// Silence makes a server dead; it must register again.
	tm.clock.Advance(25 * time.Second)
	tm.beat(a)
	tm.clock.Advance(10 * time.Second)
	tm.m.checkLiveness()
	rep, err := tm.c.ClusterReport(bg, &pb.ClusterReportRequest{})
	if err != nil || len(rep.Servers) != 2 || !rep.Servers[0].Alive || rep.Servers[1].Alive {
		t.Fatalf("report: %+v %v", rep, err)
	}
	if hb := tm.beat(b); !hb.Reregister {
		t.Error("dead server not told to register")
	}
}

func TestTruncateCutsReplicas(t *testing.T) {
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("a", ""), tm.startCS("b", ""), tm.startCS("c", "")}
	tm.create(alice, "/f")
	tm.prepare(alice, "/f", 0, false)
	h1 := tm.prepare(alice, "/f", 1, false).Chunk.Handle
	tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: "/f", Length: 2 << 20})
	length := int64(1<<20 + 100)
	if _, err := tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: alice, Path: "/f", Length: &length}); err != nil {
		t.Fatal(err)
	}
	for _, f := range cs {
		f.mu.Lock()
		tr := f.truncates
		f.mu.Unlock()
		if len(tr) != 1 || tr[0].Handle != h1 || tr[0].Version != 2 || tr[0].Length != 100 {
			t.Errorf("%s truncates: %v", f.id, tr)
		}
	}
	gc, _ := tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: "/f"})
	if len(gc.Chunks) != 2 || gc.Chunks[1].Version != 2 || len(gc.Chunks[1].Replicas) != 3 || gc.Chunks[1].Primary != "" {
		t.Errorf("after truncate: %+v", gc.Chunks)
	}
	rep, _ := tm.c.ClusterReport(bg, &pb.ClusterReportRequest{})
	if rep.Files != 1 || rep.Chunks != 2 || rep.Bytes != length || rep.UnderReplicated != 0 {
		t.Errorf("report: %+v", rep)
	}
}

func TestRestartWaitsOutOldLeases(t *testing.T) {
	tm := startMasterMin1(t, "", nil)
	tm.startCS("a", "")
	tm.create(alice, "/old")
	tm.prepare(alice, "/old", 0, false)
	dir, clk := tm.cfg.Dir, tm.clock
	tm.close()

	tm2 := startMasterMin1(t, dir, clk)
	a := tm2.startCS("a2", "")
	a.mu.Lock()
	a.versions[1] = 1
	a.mu.Unlock()
	tm2.register(a, "")
	if _, err := tm2.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/old"}); kindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("lease right after restart: %v", err)
	}
	// A chunk made after the restart needs no wait.
	tm2.create(alice, "/new")
	tm2.prepare(alice, "/new", 0, false)
	clk.Advance(20 * time.Second)
	tm2.beat(a)
	if pw := tm2.prepare(alice, "/old", 0, false); pw.Chunk.Version != 2 {
		t.Errorf("lease after the old one lapsed: %+v", pw.Chunk)
	}
}

// TestDeadPrimaryLeaseIsWaitedOut checks that the master does not name a
// new primary while a primary it declared dead may still hold its lease.
func TestDeadPrimaryLeaseIsWaitedOut(t *testing.T) {
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("a", ""), tm.startCS("b", ""), tm.startCS("c", "")}
	tm.create(alice, "/f")
	ch := tm.prepare(alice, "/f", 0, false).Chunk
	var others []*fakeCS
	for _, f := range cs {
		if f.addr != ch.Primary {
			others = append(others, f)
		}
	}
	// The primary falls silent but keeps extending... as far as it knows.
	tm.clock.Advance(5 * time.Second)
	for _, f := range others {
		tm.beat(f)
	}
	tm.clock.Advance(2 * time.Second)
	tm.m.regMu.Lock()
	tm.m.reg.markDead(tm.clock.Now().Add(30*time.Second), 30*time.Second)
	tm.m.regMu.Unlock()
	for _, f := range others {
		tm.register(f, "")
	}
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f"}); kindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("new lease while the dead primary's may hold: %v", err)
	}
	tm.clock.Advance(5 * time.Second)
	for _, f := range others {
		tm.beat(f)
	}
	pw := tm.prepare(alice, "/f", 0, false)
	if pw.Chunk.Version != 2 || pw.Chunk.Primary == ch.Primary || len(pw.Chunk.Replicas) != 2 {
		t.Errorf("lease after the old one ended: %+v", pw.Chunk)
	}
}

// TestRegisterAdoptsNewerVersion covers a master that told replicas a new
// version and stopped before logging it: the replicas' version wins and
// replicas left behind are stale.
func TestRegisterAdoptsNewerVersion(t *testing.T) {
	tm := startMaster(t, "", nil)
	a, b := tm.startCS("a", ""), tm.startCS("b", "")
	tm.create(alice, "/f")
	h := tm.prepare(alice, "/f", 0, false).Chunk.Handle
	a.mu.Lock()
	a.versions[h] = 5
	a.mu.Unlock()
	if reg := tm.register(a, ""); len(reg.Stale) != 0 || len(reg.Garbage) != 0 {
		t.Errorf("register ahead: %+v", reg)
	}
	gc, _ := tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: "/f"})
	if gc.Chunks[0].Version != 5 || len(gc.Chunks[0].Replicas) != 1 || gc.Chunks[0].Replicas[0] != a.addr {
		t.Errorf("after adoption: %+v", gc.Chunks[0])
	}
	if reg := tm.register(b, ""); len(reg.Stale) != 1 || reg.Stale[0] != h {
		t.Errorf("replica left behind: %+v", reg)
	}
}

// TestConcurrentChunkOperations runs writers, appenders, truncations,
// deletes and heartbeats at once (under -race in CI); the namespace must
// stay consistent and nothing may deadlock.
func TestConcurrentChunkOperations(t *testing.T) {
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("a", "r0"), tm.startCS("b", "r1"), tm.startCS("c", "r2")}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				p := fmt.Sprintf("/f%d", (g+i)%4)
				tm.c.Create(bg, &pb.CreateRequest{Caller: alice, Path: p, Mode: 0o644})
				tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: p, Index: int64(i % 3), Append: g%2 == 0})
				tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: p, Length: int64(i) << 19})
				switch i % 5 {
				case 1:
					l := int64(i) << 18
					tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: alice, Path: p, Length: &l})
				case 3:
					tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: p})
				}
				f := cs[(g+i)%len(cs)]
				tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Free: 1 << 39, Sample: f.report(), ExtendLeases: []uint64{1, 2, 3}})
				tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: p})
				tm.c.ClusterReport(bg, &pb.ClusterReportRequest{})
			}
		}()
	}
	wg.Wait()
	if err := tm.m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestMinimumReplicas: a new chunk goes only to servers with room; with
// fewer than the minimum (2) able to take it, the write fails with
// KindNoSpace (KindUnavailable when fewer are alive at all), and a chunk
// left with one live replica takes no write.
func TestMinimumReplicas(t *testing.T) {
	tm := startMaster(t, "", nil)
	a, b, c := tm.startCS("a", "r0"), tm.startCS("b", "r1"), tm.startCS("c", "r2")
	full := func(f *fakeCS) {
		if _, err := tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Used: 1 << 30, Free: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	full(c)
	tm.create(alice, "/f")
	pw := tm.prepare(alice, "/f", 0, false)
	if len(pw.Chunk.Replicas) != 2 || slices.Contains(pw.Chunk.Replicas, c.addr) {
		t.Fatalf("placed on %v with c full", pw.Chunk.Replicas)
	}
	full(b)
	tm.create(alice, "/g")
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/g"}); kindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("new chunk with one server with room: %v", err)
	}
	// b dies: /f's chunk has one live replica and takes no write.
	tm.clock.Advance(20 * time.Second)
	tm.beat(a)
	tm.beat(c)
	tm.clock.Advance(15 * time.Second)
	tm.beat(a)
	tm.beat(c)
	tm.m.checkLiveness()
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f"}); kindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("write to a chunk with one replica: %v", err)
	}
	// c dies too: one live server is too few servers, not too little
	// room, and the writer is told to wait.
	tm.clock.Advance(20 * time.Second)
	tm.beat(a)
	tm.clock.Advance(15 * time.Second)
	tm.beat(a)
	tm.m.checkLiveness()
	tm.create(alice, "/h")
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/h"}); kindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("new chunk with one live server: %v", err)
	}
}

// TestSafeMode: a master started on a namespace with data creates no
// chunk until the chunkservers have reported them, then leaves by itself.
func TestSafeMode(t *testing.T) {
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("a", ""), tm.startCS("b", ""), tm.startCS("c", "")}
	tm.create(alice, "/f")
	tm.prepare(alice, "/f", 0, false)
	if _, err := tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: "/f", Length: 100}); err != nil {
		t.Fatal(err)
	}
	dir, clk := tm.cfg.Dir, tm.clock
	tm.close()
	tm2 := startMaster(t, dir, clk)
	tm2.create(alice, "/g")
	_, err := tm2.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/g"})
	if kindOf(err) != chunkfs.KindUnavailable || !strings.Contains(err.Error(), "safe mode") {
		t.Fatalf("chunk created with no chunkserver known: %v", err)
	}
	rep, _ := tm2.c.ClusterReport(bg, &pb.ClusterReportRequest{})
	if !rep.SafeMode || rep.SafeModeReason == "" {
		t.Errorf("report: safe mode %v %q", rep.SafeMode, rep.SafeModeReason)
	}
	tm2.register(cs[0], "")
	tm2.register(cs[1], "")
	if rep, _ := tm2.c.ClusterReport(bg, &pb.ClusterReportRequest{}); rep.SafeMode {
		t.Fatalf("still in safe mode with the chunk located on 2 servers: %q", rep.SafeModeReason)
	}
	if _, err := tm2.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/g"}); err != nil {
		t.Fatalf("after safe mode: %v", err)
	}
}

// TestFsck: per file chunk health with totals; a chunk with data and no
// live replica is missing, one past the file's end is not.
func TestFsck(t *testing.T) {
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("a", "r0"), tm.startCS("b", "r1"), tm.startCS("c", "r2")}
	if _, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: alice, Path: "/d", Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	tm.create(alice, "/d/f")
	tm.prepare(alice, "/d/f", 0, false)
	if _, err := tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: "/d/f", Length: 100}); err != nil {
		t.Fatal(err)
	}
	tm.create(alice, "/e")
	tm.prepare(alice, "/e", 0, false) // placed, never written
	fsck := func() *pb.FsckResponse {
		r, err := tm.c.Fsck(bg, &pb.FsckRequest{Caller: alice, Path: "/"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := fsck(); r.FilesChecked != 2 || r.Chunks != 2 || r.Healthy != 2 || r.Missing != 0 || r.Files[0].Path != "/d/f" {
		t.Fatalf("healthy cluster: %+v", r)
	}
	tm.clock.Advance(20 * time.Second)
	tm.beat(cs[0])
	tm.clock.Advance(15 * time.Second)
	tm.beat(cs[0])
	tm.m.checkLiveness() // b and c dead
	if r := fsck(); r.UnderReplicated != 2 || r.Missing != 0 {
		t.Fatalf("one replica left: %+v", r)
	}
	tm.clock.Advance(35 * time.Second)
	tm.m.checkLiveness() // a dead too
	r := fsck()
	if r.Missing != 1 || r.Healthy != 1 || r.Files[0].Missing != 1 {
		t.Fatalf("no replica left: %+v", r)
	}
	if rep, _ := tm.c.ClusterReport(bg, &pb.ClusterReportRequest{}); rep.Missing != 1 {
		t.Errorf("report: missing %d", rep.Missing)
	}
}
