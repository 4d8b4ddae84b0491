package master

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

const testTrashPeriod = time.Hour

// startTrashMaster is startMasterMin1 with a trash period of an hour,
// looked at every minute of the fake clock.
func startTrashMaster(t *testing.T, dir string, clk *clock.Fake) *testMaster {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if clk == nil {
		clk = clock.NewFake(time.Unix(1_700_000_000, 0))
	}
	cfg := testConfig(t, dir, clk)
	cfg.MinReplicas = 1
	cfg.TrashPeriod, cfg.TrashInterval = testTrashPeriod, time.Minute
	cfg.DeadAfter = 10 * testTrashPeriod // the fake chunkservers beat only when a test says
	return startWith(t, cfg, clk)
}

// fileWithChunk makes alice's p with one chunk held by f and returns it.
func (tm *testMaster) fileWithChunk(f *fakeCS, p string) uint64 {
	tm.t.Helper()
	tm.create(alice, p)
	h := tm.prepare(alice, p, 0, false).Chunk.Handle
	if hb := tm.beat(f); slices.Contains(hb.Garbage, h) {
		tm.t.Fatalf("a live chunk is garbage: %+v", hb)
	}
	return h
}

// checkpoint returns the namespace's checkpoint bytes.
func (tm *testMaster) checkpoint() []byte {
	var b bytes.Buffer
	tm.m.state.read(func(ns *namespace.Namespace) {
		if err := ns.Snapshot(&b); err != nil {
			tm.t.Fatal(err)
		}
	})
	return b.Bytes()
}

func (tm *testMaster) trash(c *pb.Caller) []*pb.TrashEntry {
	tm.t.Helper()
	resp, err := tm.c.TrashList(bg, &pb.TrashListRequest{Caller: c})
	if err != nil {
		tm.t.Fatal(err)
	}
	return resp.Entries
}

// waitGarbage waits (in real time: the master's trash loop runs on its
// own goroutine once the fake clock ticks) until f is told to delete h.
func (tm *testMaster) waitGarbage(f *fakeCS, h uint64) {
	tm.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if slices.Contains(tm.beat(f).Garbage, h) {
			return
		}
	}
	tm.t.Fatalf("chunk %d was never purged; trash %d, beat %+v", h, len(tm.trash(root)), tm.beat(f))
}

// TestTrashPurgedOnlyAfterThePeriod: a deleted file's chunk stays with
// its chunkserver through the grace period and is deleted once the
// master's clock passes it; skip-trash deletes at once.
func TestTrashPurgedOnlyAfterThePeriod(t *testing.T) {
	tm := startTrashMaster(t, "", nil)
	a := tm.startCS("a", "r0")
	h := tm.fileWithChunk(a, "/f")
	now := tm.clock.Now()
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/f"}); err != nil {
		t.Fatal(err)
	}
	if tm.exists("/f") {
		t.Fatal("a deleted file is still visible")
	}
	es := tm.trash(alice)
	if len(es) != 1 || es[0].Path != "/f" || es[0].DeletedBy != alice.Uid || es[0].Chunks != 1 ||
		es[0].DeletedNs != now.UnixNano() || es[0].ExpiresNs != now.Add(testTrashPeriod).UnixNano() {
		t.Fatalf("trash: %+v", es)
	}
	rep, err := tm.c.ClusterReport(bg, &pb.ClusterReportRequest{})
	if err != nil || rep.DeadFiles != 1 || rep.DeadChunks != 1 || rep.Chunks != 0 {
		t.Fatalf("report: %+v, %v", rep, err)
	}
	tm.clock.Advance(testTrashPeriod - time.Minute)
	if hb := tm.beat(a); slices.Contains(hb.Garbage, h) {
		t.Fatalf("chunk deleted within the grace period: %+v", hb)
	}
	tm.clock.Advance(2 * time.Minute)
	tm.waitGarbage(a, h)
	if es := tm.trash(root); len(es) != 0 {
		t.Fatalf("trash after the period: %+v", es)
	}

	h2 := tm.fileWithChunk(a, "/g")
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/g", SkipTrash: true}); err != nil {
		t.Fatal(err)
	}
	if hb := tm.beat(a); !slices.Contains(hb.Garbage, h2) {
		t.Fatalf("skip-trash did not free the chunk at once: %+v", hb)
	}
}

// TestMetadataBytesCountTheTrash: a file deleted into the trash keeps
// its heap until it is purged, so Table 2's "metadata at master" does not
// drop at the delete.
func TestMetadataBytesCountTheTrash(t *testing.T) {
	tm := startTrashMaster(t, "", nil)
	a := tm.startCS("a", "r0")
	tm.fileWithChunk(a, "/f")
	before := tm.m.Figures().MetadataBytes
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/f"}); err != nil {
		t.Fatal(err)
	}
	if got := tm.m.Figures().MetadataBytes; got != before {
		t.Fatalf("metadata at master %d B with /f in the trash, %d B before the delete", got, before)
	}
}

// TestTrashPeriodShorterThanInterval: with a grace period shorter than
// the trash interval, a deleted file's chunk is freed within two periods,
// not after the interval (a master restarted more often than the interval
// would otherwise never purge, and the trash would fill the disks).
func TestTrashPeriodShorterThanInterval(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir(), clk)
	cfg.MinReplicas = 1
	cfg.TrashPeriod, cfg.TrashInterval = 5*time.Second, time.Hour
	cfg.DeadAfter = 10 * time.Hour // the fake chunkservers beat only when a test says
	tm := startWith(t, cfg, clk)
	a := tm.startCS("a", "r0")
	h := tm.fileWithChunk(a, "/f")
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/f"}); err != nil {
		t.Fatal(err)
	}
	if hb := tm.beat(a); slices.Contains(hb.Garbage, h) {
		t.Fatalf("chunk deleted within the grace period: %+v", hb)
	}
	tm.clock.Advance(5 * time.Second)
	tm.clock.Advance(5 * time.Second)
	tm.waitGarbage(a, h)
	if es := tm.trash(root); len(es) != 0 {
		t.Fatalf("trash after the period: %+v", es)
	}
}

// TestUndeleteOverRPC: undelete within the period brings the file and
// its chunk back; a taken name, a stranger and bad arguments are refused
// and change nothing.
func TestUndeleteOverRPC(t *testing.T) {
	tm := startTrashMaster(t, "", nil)
	a := tm.startCS("a", "r0")
	h := tm.fileWithChunk(a, "/f")
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/f"}); err != nil {
		t.Fatal(err)
	}
	tm.create(alice, "/f")
	for _, c := range []struct {
		req  *pb.UndeleteRequest
		kind chunkfs.Kind
	}{
		{&pb.UndeleteRequest{Caller: alice, Path: "/f"}, chunkfs.KindExist},
		{&pb.UndeleteRequest{Caller: bob, Path: "/f", To: "/bob"}, chunkfs.KindPermission},
		{&pb.UndeleteRequest{Caller: alice}, chunkfs.KindInvalid},
		{&pb.UndeleteRequest{Caller: alice, Path: "f"}, chunkfs.KindInvalid},
		{&pb.UndeleteRequest{Caller: alice, Path: "/f", To: "/a/../b"}, chunkfs.KindInvalid},
		{&pb.UndeleteRequest{Caller: alice, Path: "/f", To: "/no/such/dir"}, chunkfs.KindNotExist},
		{&pb.UndeleteRequest{Caller: alice, Id: 1 << 63}, chunkfs.KindInvalid},
		{&pb.UndeleteRequest{Caller: alice, Id: 7}, chunkfs.KindNotExist},
	} {
		before := tm.checkpoint()
		if _, err := tm.c.Undelete(bg, c.req); kindOf(err) != c.kind {
			t.Errorf("undelete %+v: %v, want %v", c.req, err, c.kind)
		}
		if !bytes.Equal(before, tm.checkpoint()) {
			t.Errorf("undelete %+v failed but changed the state", c.req)
		}
	}
	if _, err := tm.c.PurgeTrash(bg, &pb.PurgeTrashRequest{Caller: bob, Id: 1}); kindOf(err) != chunkfs.KindPermission {
		t.Errorf("bob purged alice's entry: %v", err)
	}
	resp, err := tm.c.Undelete(bg, &pb.UndeleteRequest{Caller: alice, Path: "/f", To: "/old/f", Parents: true})
	if err != nil || resp.Info.Chunks != 1 {
		t.Fatalf("undelete to a new name: %+v, %v", resp, err)
	}
	gc, err := tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: "/old/f", Count: 1})
	if err != nil || len(gc.Chunks) != 1 || gc.Chunks[0].Handle != h {
		t.Fatalf("undeleted file's chunks: %+v, %v", gc, err)
	}
	tm.clock.Advance(2 * testTrashPeriod)
	tm.m.purgeDue()
	if hb := tm.beat(a); slices.Contains(hb.Garbage, h) {
		t.Fatalf("an undeleted file's chunk was purged: %+v", hb)
	}
}

// TestTrashSurvivesRestart: entries made before a checkpoint and after
// it (in the log only) keep their paths and times across a restart, and
// the restarted master purges them when their time comes.
func TestTrashSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	tm := startTrashMaster(t, dir, clk)
	a := tm.startCS("a", "r0")
	h := tm.fileWithChunk(a, "/f")
	tm.create(alice, "/g")
	for _, p := range []string{"/f", "/g"} {
		if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: p}); err != nil {
			t.Fatal(err)
		}
		if p == "/f" {
			if err := tm.m.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Second)
	}
	before := tm.trash(root)
	tm.close()
	tm = startTrashMaster(t, dir, clk)
	after := tm.trash(root)
	if len(after) != 2 || len(before) != 2 {
		t.Fatalf("trash before the restart %+v, after %+v", before, after)
	}
	for i := range after {
		b, a := before[i], after[i]
		if a.Path != b.Path || a.DeletedNs != b.DeletedNs || a.ExpiresNs != b.ExpiresNs || a.Id != b.Id {
			t.Errorf("entry %d before the restart %+v, after %+v", i, b, a)
		}
	}
	tm.register(a, "r0") // the same chunkserver, holding the chunk still
	clk.Advance(testTrashPeriod)
	tm.waitGarbage(a, h)
}

// TestTrashDuePurgedAtStart: an entry whose period passed while the
// master was down is purged when it starts, before its first look.
func TestTrashDuePurgedAtStart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	tm := startTrashMaster(t, dir, clk)
	a := tm.startCS("a", "r0")
	h := tm.fileWithChunk(a, "/f")
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/f"}); err != nil {
		t.Fatal(err)
	}
	tm.close()
	clk.Advance(testTrashPeriod)
	tm = startTrashMaster(t, dir, clk)
	tm.register(a, "r0") // the same chunkserver, holding the chunk still
	tm.waitGarbage(a, h)
	if es := tm.trash(root); len(es) != 0 {
		t.Fatalf("trash after the restart: %+v", es)
	}
}

// TestTrashPeriodFollowsTheConfiguration: a master restarted with another
// period logs it; entries already in the trash then expire by it.
func TestTrashPeriodFollowsTheConfiguration(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	tm := startTrashMaster(t, dir, clk)
	tm.create(alice, "/f")
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/f"}); err != nil {
		t.Fatal(err)
	}
	tm.close()
	cfg := testConfig(t, dir, clk)
	cfg.TrashPeriod = 0
	tm = startWith(t, cfg, clk)
	resp, err := tm.c.TrashList(bg, &pb.TrashListRequest{Caller: root})
	if err != nil || resp.PeriodNs != 0 {
		t.Fatalf("period after a restart with 0: %+v, %v", resp, err)
	}
	tm.m.purgeDue()
	if es := tm.trash(root); len(es) != 0 {
		t.Fatalf("trash with period 0: %+v", es)
	}
	for _, p := range []time.Duration{-time.Second, 11 * 365 * 24 * time.Hour} {
		cfg.TrashPeriod = p
		if err := cfg.Validate(); err == nil {
			t.Errorf("trash period %v accepted", p)
		}
	}
}

// TestCheckpointDuringCreatesRestores: checkpoints written while creates
// go on (the log's frozen path), then a restart from the newest one and
// the log after it: every acknowledged file is there and the namespace
// checks.
func TestCheckpointDuringCreatesRestores(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	tm := startTrashMaster(t, dir, clk)
	done := make(chan []string)
	go func() {
		var made []string
		for i := range 200 {
			p := fmt.Sprintf("/f%03d", i)
			if _, err := tm.c.Create(bg, &pb.CreateRequest{Caller: alice, Path: p, Mode: 0o644}); err == nil {
				made = append(made, p)
			}
			if i%3 == 0 {
				tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: fmt.Sprintf("/f%03d", i/2)})
			}
		}
		done <- made
	}()
	for range 5 {
		if err := tm.m.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	made := <-done
	want := tm.checkpoint()
	tm.close()
	tm = startTrashMaster(t, dir, clk)
	if got := tm.checkpoint(); !bytes.Equal(got, want) {
		t.Fatalf("the state after a restart differs from the state before (%d files made)", len(made))
	}
}
