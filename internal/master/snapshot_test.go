package master

import (
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// chunkAt returns chunk index of p as the namespace has it.
func (tm *testMaster) chunkAt(p string, index int64) namespace.Chunk {
	tm.t.Helper()
	var ch namespace.Chunk
	tm.m.state.read(func(ns *namespace.Namespace) {
		_, cs, err := ns.Chunks(chunkfs.Caller{}, p, index, 1, false)
		if err != nil || len(cs) != 1 {
			tm.t.Fatalf("chunk %d of %s: %v %v", index, p, cs, err)
		}
		ch = cs[0]
	})
	return ch
}

// TestTruncateSharedChunkInBatch: a truncation sent in a Batch that cuts
// a chunk a snapshot shares cuts a copy; the snapshot keeps the chunk and
// its length, and the replicas are told to copy before they are cut.
func TestTruncateSharedChunkInBatch(t *testing.T) {
	tm := startMaster(t, "", nil)
	servers := []*fakeCS{tm.startCS("a", "r1"), tm.startCS("b", "r2"), tm.startCS("c", "r3")}
	tm.create(alice, "/f")
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f", Index: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: "/f", Length: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.c.MakeSnapshot(bg, &pb.SnapshotRequest{Caller: alice, Src: "/f", Dst: "/g"}); err != nil {
		t.Fatal(err)
	}
	old := tm.chunkAt("/f", 0)
	length := int64(500)
	resp, err := tm.c.Batch(bg, &pb.BatchRequest{Ops: []*pb.MetaOp{{Op: &pb.MetaOp_SetAttr{SetAttr: &pb.SetAttrRequest{Caller: alice, Path: "/f", Length: &length}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.Results[0].GetError(); e != nil {
		t.Fatalf("batch truncation: %v", e)
	}
	now, kept := tm.chunkAt("/f", 0), tm.chunkAt("/g", 0)
	if now.Handle == old.Handle || now.Shared || kept.Handle != old.Handle || kept.Shared {
		t.Errorf("after the truncation: /f %+v, /g %+v, was %+v", now, kept, old)
	}
	for _, cs := range servers {
		cs.mu.Lock()
		copied := len(cs.copies) == 1 && cs.copies[0].NewHandle == uint64(now.Handle)
		var cutOld bool
		for _, tr := range cs.truncates {
			cutOld = cutOld || tr.Handle == uint64(old.Handle)
		}
		cs.mu.Unlock()
		if !copied || cutOld {
			t.Errorf("%s: copied %v, cut the shared chunk %v", cs.id, copied, cutOld)
		}
	}
	st, err := tm.c.Stat(bg, &pb.StatRequest{Caller: alice, Path: "/g"})
	if err != nil || st.Info.Length != 1000 {
		t.Errorf("snapshot after the truncation: %+v %v", st, err)
	}
}
