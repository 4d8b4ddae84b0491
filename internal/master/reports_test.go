package master

import (
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Tests of reports (Register, heartbeat samples) that race the calls
// raising a replica's version (Lease, Truncate): a replica holding the
// chunk's data must never be forgotten or condemned because of such a race.

// writtenChunk makes /f with one chunk, version 1, written to 1 MiB on
// three fake chunkservers.
func writtenChunk(t *testing.T) (*testMaster, []*fakeCS, uint64) {
	t.Helper()
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("a", "r0"), tm.startCS("b", "r1"), tm.startCS("c", "r2")}
	tm.create(alice, "/f")
	h := tm.prepare(alice, "/f", 0, false).Chunk.Handle
	if _, err := tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: "/f", Length: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	return tm, cs, h
}

func (tm *testMaster) setLength(length int64) error {
	_, err := tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: alice, Path: "/f", Length: &length})
	return err
}

// location returns /f's chunk 0 as the master lists it.
func (tm *testMaster) location() *pb.ChunkLocation {
	tm.t.Helper()
	gc, err := tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: "/f"})
	if err != nil || len(gc.Chunks) != 1 {
		tm.t.Fatalf("get chunks: %+v %v", gc, err)
	}
	return gc.Chunks[0]
}

func wantReplicas(t *testing.T, loc *pb.ChunkLocation, version uint64, cs ...*fakeCS) {
	t.Helper()
	var want []string
	for _, f := range cs {
		want = append(want, f.addr)
	}
	got := slices.Clone(loc.Replicas)
	slices.Sort(got)
	slices.Sort(want)
	if loc.Version != version || !slices.Equal(got, want) {
		t.Errorf("chunk at version %d on %v, want version %d on %v", loc.Version, got, version, want)
	}
}

// Every replica was declared dead (a starved master) when the truncation
// came: the cut reached no replica. Logging the new version anyway made all
// of them stale when they registered again: the chunk was lost.
func TestTruncateReachingNoReplicaLosesNothing(t *testing.T) {
	tm, cs, h := writtenChunk(t)
	tm.clock.Advance(tm.cfg.DeadAfter + time.Second)
	tm.m.checkLiveness()
	if err := tm.setLength(100); kindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("truncation that cut no replica: %v, want unavailable", err)
	}
	for _, f := range cs {
		if reg := tm.register(f, ""); len(reg.Stale) != 0 || len(reg.Garbage) != 0 {
			t.Errorf("%s registering again: %+v", f.id, reg)
		}
	}
	wantReplicas(t, tm.location(), 1, cs...)
	// The retry (same length) cuts, at a version above the one told before.
	if err := tm.setLength(100); err != nil {
		t.Fatal(err)
	}
	for _, f := range cs {
		if tr := f.truncateCalls(); len(tr) != 1 || tr[0].Handle != h || tr[0].Version != 3 || tr[0].Length != 100 {
			t.Errorf("%s truncates: %v", f.id, tr)
		}
	}
	if err := tm.setLength(1 << 20); err != nil {
		t.Fatal(err)
	}
	wantReplicas(t, tm.location(), 3, cs...)
}

// Full reports built before the truncation reached the replicas, handled
// after its version was logged, made every replica stale.
func TestTruncateRacingRegistrationsKeepsReplicas(t *testing.T) {
	tm, cs, _ := writtenChunk(t)
	var before [][]*pb.ChunkReplica
	for _, f := range cs {
		before = append(before, f.report())
	}
	if err := tm.setLength(100); err != nil {
		t.Fatal(err)
	}
	for i, f := range cs {
		if reg := tm.registerWith(f, "", before[i]); len(reg.Stale) != 0 || len(reg.Garbage) != 0 {
			t.Errorf("%s registering with a report from before the cut: %+v", f.id, reg)
		}
	}
	wantReplicas(t, tm.location(), 2, cs...)
	for _, f := range cs {
		if hb := tm.beat(f); len(hb.Garbage) != 0 {
			t.Errorf("%s heartbeat: %+v", f.id, hb)
		}
	}
	wantReplicas(t, tm.location(), 2, cs...)
}

// A replica whose Truncate call failed is forgotten; but the call may have
// cut it and only the answer been lost. A sample or full report built before
// the cut must not condemn it: the master asks it first.
func TestTruncateFailedCallThenOldReports(t *testing.T) {
	tm, cs, h := writtenChunk(t)
	a, b, c := cs[0], cs[1], cs[2]
	var before [][]*pb.ChunkReplica
	for _, f := range cs {
		before = append(before, f.report())
	}
	b.mu.Lock()
	b.truncLost = true // cuts, but the master hears a failure
	b.mu.Unlock()
	c.mu.Lock()
	c.truncFail = true // really not cut: stale
	c.mu.Unlock()
	if err := tm.setLength(100); err != nil {
		t.Fatal(err)
	}
	wantReplicas(t, tm.location(), 2, a)
	// Old samples: b is asked and counted again; c is asked and is stale.
	if hb := tm.beatWith(b, before[1]); len(hb.Garbage) != 0 {
		t.Errorf("b's old sample condemned a cut replica: %+v", hb)
	}
	if hb := tm.beatWith(c, before[2]); len(hb.Garbage) != 1 || hb.Garbage[0] != h {
		t.Errorf("c's old sample of a replica that was not cut: %+v", hb)
	}
	wantReplicas(t, tm.location(), 2, a, b)

	// The same with full reports: a replica in doubt is not made stale by
	// an old report; the next sample settles it.
	if err := tm.setLength(50); err != nil {
		t.Fatal(err)
	}
	wantReplicas(t, tm.location(), 3, a)
	if reg := tm.registerWith(b, "", before[1]); len(reg.Stale) != 0 {
		t.Errorf("b's old report made a replica in doubt stale: %+v", reg)
	}
	if hb := tm.beat(b); len(hb.Garbage) != 0 {
		t.Errorf("b's fresh sample: %+v", hb)
	}
	wantReplicas(t, tm.location(), 3, a, b)
}

// A full report built before a Lease call raised the replica's version,
// handled after the version was logged, marked the just-raised replica
// stale (and the server deleted it).
func TestRegisterRacingGrantKeepsReplica(t *testing.T) {
	tm, cs, h := writtenChunk(t)
	a := cs[0]
	before := a.report()
	tm.clock.Advance(tm.cfg.LeaseDuration + 2*time.Second) // the first lease ends
	for _, f := range cs {
		tm.beat(f)
	}
	if pw := tm.prepare(alice, "/f", 0, false); pw.Chunk.Version != 2 {
		t.Fatalf("second grant: %+v", pw.Chunk)
	}
	if reg := tm.registerWith(a, "r0", before); len(reg.Stale) != 0 || len(reg.Garbage) != 0 {
		t.Errorf("report from before the grant: %+v", reg)
	}
	wantReplicas(t, tm.location(), 2, cs...)
	if hb := tm.beat(a); len(hb.Garbage) != 0 {
		t.Errorf("heartbeat: %+v", hb)
	}
	// A replica that missed a grant is stale, once its server confirms it.
	tm.clock.Advance(tm.cfg.LeaseDuration + 2*time.Second)
	for _, f := range cs {
		tm.beat(f)
	}
	a.mu.Lock()
	a.fail = true
	a.mu.Unlock()
	for {
		if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f"}); err == nil {
			break
		}
	}
	if hb := tm.beat(a); len(hb.Garbage) != 1 || hb.Garbage[0] != h {
		t.Errorf("sample of a replica that missed a grant: %+v", hb)
	}
	if reg := tm.registerWith(a, "r0", before); len(reg.Stale) != 1 || reg.Stale[0] != h {
		t.Errorf("report of a replica that missed a grant: %+v", reg)
	}
}

// A lease granted between the truncation and its cut moved the chunk's
// version: the cut then reached no replica and logged a version none had.
// Now the cut is skipped (writes after the truncation may be in the chunk).
func TestCutAfterNewLeaseKeepsReplicas(t *testing.T) {
	tm, cs, h := writtenChunk(t)
	tm.clock.Advance(tm.cfg.LeaseDuration + 2*time.Second)
	for _, f := range cs {
		tm.beat(f)
	}
	tm.prepare(alice, "/f", 0, false) // version 2
	cut := namespace.Cut{Chunk: namespace.Chunk{Handle: chunkfs.Handle(h), Version: 2}, Length: 100}
	if err := tm.m.cutChunk(bg, "/f", cut); err != nil {
		t.Fatal(err)
	}
	for _, f := range cs {
		if tr := f.truncateCalls(); len(tr) != 0 {
			t.Errorf("%s cut after a newer lease: %v", f.id, tr)
		}
	}
	wantReplicas(t, tm.location(), 2, cs...)
}
