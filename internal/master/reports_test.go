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

// A grant's Lease call to c took the new version but its answer was lost:
// the writes acknowledged at that version went through a and b alone.
// c's heartbeat then reported the version, and c was counted again: reads
// sent to it returned the bytes from before those writes (issue #15). It
// is held back until the next grant leaves it stale.
func TestLostGrantAnswerHoldsReplicaBack(t *testing.T) {
	tm, cs, h := lostGrantChunk(t)
	a, b, c := cs[0], cs[1], cs[2] // c is a secondary
	// The writer's mutations at version 2 reach a and b; c reports the
	// version all the same, by heartbeat and by registration.
	if hb := tm.beat(c); len(hb.Garbage) != 0 {
		t.Errorf("c's sample: %+v", hb)
	}
	wantReplicas(t, tm.location(), 2, a, b)
	if reg := tm.register(c, "r2"); len(reg.Stale) != 0 || len(reg.Garbage) != 0 {
		t.Errorf("c's registration: %+v", reg)
	}
	wantReplicas(t, tm.location(), 2, a, b)

	// The next grant goes to a and b; c's copy is stale, and deleted.
	tm.clock.Advance(tm.cfg.LeaseDuration + 2*time.Second)
	for _, f := range cs {
		tm.beat(f)
	}
	c.mu.Lock()
	c.leaseLost = false
	calls := len(c.leases)
	c.mu.Unlock()
	pw := tm.prepare(alice, "/f", 0, false) // at 3, or 4 when a repair round moved the chunk on first
	if pw.Chunk.Version < 3 {
		t.Fatalf("next grant: %+v", pw.Chunk)
	}
	if n := len(c.leaseCalls()); n != calls {
		t.Errorf("the next grant called c (%d calls, %d before)", n, calls)
	}
	if hb := tm.beat(c); len(hb.Garbage) != 1 || hb.Garbage[0] != h {
		t.Errorf("c's sample after the next grant: %+v, want %d deleted", hb, h)
	}
	wantReplicas(t, tm.location(), pw.Chunk.Version, a, b)
}

// A grant whose secondaries all fail the Lease call reaches the primary
// alone, below the minimum of two replicas: no writer gets that chunk (an
// acknowledgement on one replica), the grant answers unavailable as for a
// chunk below the minimum, and no lease is left on the one replica: the
// chunk is blocked, so it is re-replicated first, at once.
func TestShortGrantNotHandedOut(t *testing.T) {
	tm, cs, h := writtenChunk(t)
	tm.clock.Advance(tm.cfg.LeaseDuration + 2*time.Second)
	for _, f := range cs {
		tm.beat(f)
		f.mu.Lock()
		f.secFail = true
		f.mu.Unlock()
	}
	for range 2 {
		_, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f", Index: 0})
		if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
			t.Fatalf("prepare write on a grant one replica took: %v, want unavailable", err)
		}
	}
	var primary *fakeCS
	for _, f := range cs {
		f.mu.Lock()
		if f.versions[h] == 2 {
			primary = f
		}
		f.mu.Unlock()
	}
	if primary == nil {
		t.Fatal("no server took the grant's version")
	}
	loc := tm.location()
	wantReplicas(t, loc, 2, primary)
	if loc.Primary != "" {
		t.Errorf("a lease is left on the one replica: %+v", loc)
	}
	tm.m.regMu.Lock()
	blocked := tm.m.reg.blocked(chunkfs.Handle(h), tm.clock.Now())
	tm.m.regMu.Unlock()
	if !blocked {
		t.Error("the chunk is not first in the repair queue")
	}
	// With no lease to revoke or fence, the chunk is cloned at once.
	if revoke, fence, _ := tm.m.planRepairs(false); len(revoke) != 0 || len(fence) != 0 {
		t.Errorf("the repair waits on a lease: revoke %v, fence %v", revoke, fence)
	}
}

// A replica declared dead while a lease is out, back at the same version
// before the next grant, is not listed to readers nor given the grant:
// the fenced grant moves the others on and its copy is stale.
func TestDeadReplicaBackUnderLeaseHeldBack(t *testing.T) {
	tm, cs, h := writtenChunk(t)
	a, b, c := primaryFirst(cs) // a: the primary, which keeps its lease
	for range int(tm.cfg.DeadAfter/(5*time.Second)) + 1 {
		tm.clock.Advance(5 * time.Second)
		tm.beat(a, h)
		tm.beat(b)
	}
	tm.m.checkLiveness()
	wantReplicas(t, tm.location(), 1, a, b)
	if reg := tm.register(c, "r2"); len(reg.Stale) != 0 || len(reg.Garbage) != 0 {
		t.Errorf("c back: %+v", reg)
	}
	wantReplicas(t, tm.location(), 1, a, b)
	pw := tm.prepare(alice, "/f", 0, false)
	if got := slices.Sorted(slices.Values(pw.Chunk.Replicas)); pw.Chunk.Version != 2 || !slices.Equal(got, sortedAddrs(a, b)) {
		t.Fatalf("fenced grant: version %d on %v, want 2 on a and b", pw.Chunk.Version, got)
	}
	if reg := tm.register(c, "r2"); len(reg.Stale) != 1 || reg.Stale[0] != h {
		t.Errorf("c after the fenced grant: %+v, want %d stale", reg, h)
	}
}

// primaryFirst returns cs with the holder of the first lease granted first.
func primaryFirst(cs []*fakeCS) (*fakeCS, *fakeCS, *fakeCS) {
	out := slices.Clone(cs)
	for i, f := range out {
		if primaries(f.leaseCalls()) > 0 {
			out[0], out[i] = out[i], out[0]
		}
	}
	return out[0], out[1], out[2]
}

func sortedAddrs(cs ...*fakeCS) []string {
	var out []string
	for _, f := range cs {
		out = append(out, f.addr)
	}
	slices.Sort(out)
	return out
}

// TestHeldBackReplicaLeftStaleWithoutWrite: a replica held back after it
// left under a lease is not kept uncounted until the chunk's next write:
// once the lease has ended, a repair round moves the counted replicas to
// the next version with no lease, and the held-back one is stale.
func TestHeldBackReplicaLeftStaleWithoutWrite(t *testing.T) {
	tm, cs, h := writtenChunk(t)
	a, b, c := primaryFirst(cs)
	for range int(tm.cfg.DeadAfter/(5*time.Second)) + 1 {
		tm.clock.Advance(5 * time.Second)
		tm.beat(a, h)
		tm.beat(b)
	}
	tm.m.checkLiveness()
	tm.register(c, "r2")
	tm.clock.Advance(tm.cfg.LeaseDuration + 2*time.Second) // the lease ends
	for _, f := range cs {
		tm.beat(f)
	}
	tm.m.repairOnce(false) // or the round the clock started, still running
	for end := time.Now().Add(5 * time.Second); tm.location().Version < 2 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	wantReplicas(t, tm.location(), 2, a, b)
	for _, f := range []*fakeCS{a, b} {
		if calls := f.leaseCalls(); calls[len(calls)-1].Version != 2 || calls[len(calls)-1].LeaseMs != 0 {
			t.Errorf("%s's last Lease call %+v, want version 2 with no lease", f.id, calls[len(calls)-1])
		}
	}
	// c's copy is stale (or, should a clone to c have failed meanwhile,
	// garbage already): it is deleted.
	told := slices.Contains(tm.register(c, "r2").Stale, h)
	for end := time.Now().Add(5 * time.Second); !told && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		told = slices.Contains(tm.beat(c).Garbage, h)
	}
	if !told {
		t.Errorf("c was never told to delete its copy of %d, left behind at version 1", h)
	}
}

// TestLostGrantHeldBackAfterRestart: the replica held back after its grant
// answer was lost (TestLostGrantAnswerHoldsReplicaBack) is held back in
// the log. A master started again on the same directory, which learns
// locations from reports alone as a new leader does, neither lists c at
// that version when c registers nor calls it at the next grant. Before
// the fact was logged it counted c, with the bytes from before the
// writes, and moved it on with the others (issue #15).
func TestLostGrantHeldBackAfterRestart(t *testing.T) {
	tm, cs, h := lostGrantChunk(t)
	a, b, c := cs[0], cs[1], cs[2]
	var held []namespace.HeldBack
	tm.m.state.read(func(ns *namespace.Namespace) { held = slices.Clone(ns.HeldBackOf(chunkfs.Handle(h))) })
	if !slices.Equal(held, []namespace.HeldBack{{Server: c.id, Version: 2}}) {
		t.Fatalf("the log holds back %v, want c at 2", held)
	}
	tm.close()
	tm2 := startMaster(t, tm.cfg.Dir, tm.clock)
	for _, f := range []*fakeCS{c, a, b} {
		tm2.register(f, "")
	}
	wantReplicas(t, tm2.location(), 2, a, b)
	tm2.beat(c)
	wantReplicas(t, tm2.location(), 2, a, b)

	tm2.clock.Advance(tm2.cfg.LeaseDuration + 2*time.Second) // the hold ends
	for _, f := range cs {
		tm2.beat(f)
	}
	c.mu.Lock()
	c.leaseLost = false
	calls := len(c.leases)
	c.mu.Unlock()
	pw := tm2.prepare(alice, "/f", 0, false)
	if n := len(c.leaseCalls()); pw.Chunk.Version < 3 || n != calls {
		t.Errorf("next grant at version %d called c (%d calls, %d before)", pw.Chunk.Version, n, calls)
	}
	wantReplicas(t, tm2.location(), pw.Chunk.Version, a, b)
}

// lostGrantChunk is writtenChunk granted again at version 2 with the Lease
// call to c, a secondary, taking the version and its answer lost: c is
// held back at 2. The servers come primary first.
func lostGrantChunk(t *testing.T) (*testMaster, []*fakeCS, uint64) {
	tm, cs, h := writtenChunk(t)
	a, b, c := primaryFirst(cs)
	tm.clock.Advance(tm.cfg.LeaseDuration + 2*time.Second)
	for _, f := range cs {
		tm.beat(f)
	}
	c.mu.Lock()
	c.leaseLost = true
	c.mu.Unlock()
	pw := tm.prepare(alice, "/f", 0, false)
	if got := slices.Sorted(slices.Values(pw.Chunk.Replicas)); pw.Chunk.Version != 2 || !slices.Equal(got, sortedAddrs(a, b)) {
		t.Fatalf("grant: version %d on %v, want 2 on a and b", pw.Chunk.Version, got)
	}
	return tm, []*fakeCS{a, b, c}, h
}

// TestHeldBackOnlyShownMissing: a chunk whose only reported copy is held
// back (the master restarted and the servers of its counted replicas
// never came back) is missing, and fsck and the cluster report say it is
// held back: the operator sees why the copy on a live server is not
// served.
func TestHeldBackOnlyShownMissing(t *testing.T) {
	tm0, cs, _ := lostGrantChunk(t)
	tm0.close()
	tm := startMaster(t, tm0.cfg.Dir, tm0.clock)
	tm.register(cs[2], "")
	if loc := tm.location(); len(loc.Replicas) != 0 {
		t.Fatalf("the held-back copy is listed: %v", loc.Replicas)
	}
	fs, err := tm.c.Fsck(bg, &pb.FsckRequest{Caller: root, Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if fs.Missing != 1 || fs.MissingHeldBack != 1 || len(fs.Files) != 1 || fs.Files[0].MissingHeldBack != 1 {
		t.Errorf("fsck: %d missing, %d held back (files %v); want 1 and 1", fs.Missing, fs.MissingHeldBack, fs.Files)
	}
	rep, err := tm.c.ClusterReport(bg, &pb.ClusterReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != 1 || rep.MissingHeldBack != 1 {
		t.Errorf("report: %d missing, %d held back; want 1 and 1", rep.Missing, rep.MissingHeldBack)
	}
}

// TestUnloggedHoldBackRefusesTheChain: a replica that leaves the counted
// set under a lease is held back in the leader's memory alone (it leaves
// no chain: every chain handed out so far names it). A writer that found
// the lease valid just before it left would be handed a chain without it
// at the same version, which no other master knows to hold it back
// against. It is refused, retriably, and its retry gets the survivors at
// a new version.
func TestUnloggedHoldBackRefusesTheChain(t *testing.T) {
	tm, cs, h := writtenChunk(t)
	a, b, c := primaryFirst(cs)
	now := tm.clock.Now()
	tm.m.regMu.Lock()
	tm.m.reg.dropReplica(tm.m.reg.servers[c.id], chunkfs.Handle(h), now) // c left under the lease
	tm.m.reg.chunks.get(chunkfs.Handle(h)).setFence(false)               // as ensureLease found it a moment before
	tm.m.regMu.Unlock()
	_, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f", Index: 0})
	if kindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("prepare write with c held back unlogged: %v, want unavailable", err)
	}
	pw := tm.prepare(alice, "/f", 0, false)
	if got := slices.Sorted(slices.Values(pw.Chunk.Replicas)); pw.Chunk.Version != 2 || !slices.Equal(got, sortedAddrs(a, b)) {
		t.Errorf("the retry: version %d on %v, want 2 on a and b", pw.Chunk.Version, got)
	}
}
