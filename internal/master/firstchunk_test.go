package master

import (
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestCreateFirstChunkSavesAnEntry: a create asking for its first chunk
// (unary or in a batch) allocates it in its own log entry and places it
// at version 1 with no entry more, so the first PrepareWrite finds it
// under a lease. A placement at create that fails (it may have reached a
// server) leaves the chunk to its first writer, at a new version.
func TestCreateFirstChunkSavesAnEntry(t *testing.T) {
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("cs0", "r0"), tm.startCS("cs1", "r1"), tm.startCS("cs2", "r2")}
	tm.create(alice, "/warm")
	tm.prepare(alice, "/warm", 0, false) // logs the lease horizon

	cr, err := tm.c.Create(bg, &pb.CreateRequest{Caller: alice, Path: "/f", Mode: 0o644, FirstChunk: true})
	if err != nil || cr.Info.Chunks != 1 {
		t.Fatalf("create with first chunk: %v %v", cr, err)
	}
	for _, f := range cs {
		if calls := f.leaseCalls(); len(calls) != 2 || !calls[1].Create || calls[1].Version != 1 {
			t.Errorf("%s lease calls after the create: %v", f.id, calls)
		}
	}
	pw := tm.prepare(alice, "/f", 0, false)
	if pw.StateId != cr.StateId || pw.Chunk.Version != 1 || len(pw.Chunk.Replicas) != 3 {
		t.Fatalf("prepare after create: state %d (create's %d), chunk %+v: want no entry, version 1", pw.StateId, cr.StateId, pw.Chunk)
	}
	for _, f := range cs {
		if calls := f.leaseCalls(); len(calls) != 2 {
			t.Errorf("%s: prepare made lease calls: %v", f.id, calls)
		}
	}

	br := tm.batch(&pb.MetaOp{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: alice, Path: "/g", Mode: 0o644, FirstChunk: true}}})
	gid := br.Results[0].GetCreate().GetStateId()
	if pw := tm.prepare(alice, "/g", 0, false); pw.StateId != gid || pw.Chunk.Version != 1 {
		t.Fatalf("prepare after a batched create: state %d (create's %d), version %d", pw.StateId, gid, pw.Chunk.Version)
	}

	// A sparse file: written past chunk 0 first, chunk 0 still takes writes.
	if _, err := tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: "/g", Length: 3 << 20}); err != nil {
		t.Fatal(err)
	}
	tm.prepare(alice, "/g", 0, false)

	// Every server failing at the create: the file is made, its chunk is
	// not placed, and the first write places it at version 2.
	setFail := func(fail bool) {
		for _, f := range cs {
			f.mu.Lock()
			f.fail = fail
			f.mu.Unlock()
		}
	}
	setFail(true)
	cr, err = tm.c.Create(bg, &pb.CreateRequest{Caller: alice, Path: "/h", Mode: 0o644, FirstChunk: true})
	if err != nil {
		t.Fatalf("create with every server failing: %v", err)
	}
	setFail(false)
	if pw := tm.prepare(alice, "/h", 0, false); pw.Chunk.Version != 2 || pw.StateId <= cr.StateId {
		t.Fatalf("placement after a failed one: version %d, state %d (create's %d): want version 2, logged", pw.Chunk.Version, pw.StateId, cr.StateId)
	}
}

// TestFirstChunksBounded: the markers are bounded; the oldest go first.
func TestFirstChunksBounded(t *testing.T) {
	var f firstChunks
	for h := chunkfs.Handle(1); h <= maxFirstChunks+10; h++ {
		f.add(h)
	}
	if len(f.set) != maxFirstChunks {
		t.Fatalf("%d markers kept, want %d", len(f.set), maxFirstChunks)
	}
	if f.take(5) || !f.take(11) || f.take(11) || !f.take(maxFirstChunks+10) {
		t.Fatal("take: want the oldest ten gone, each marker taken once")
	}
}
