package master

import (
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestDeleteReturnsParent: a delete, unary or in a batch, answers with
// its parent directory as a stat right after gives it (a mount answers
// the kernel's next look at the directory with it); a failed delete in a
// batch answers an error alone.
func TestDeleteReturnsParent(t *testing.T) {
	tm := startMaster(t, "", nil)
	if _, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/d", Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	tm.create(alice, "/d/a")
	tm.create(alice, "/d/b")
	check := func(how string, got *pb.FileInfo) {
		t.Helper()
		checkParent(t, tm, "/d", how, got)
	}
	d, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/d/a"})
	if err != nil {
		t.Fatal(err)
	}
	check("unary", d.Parent)

	resp := tm.batch(
		&pb.MetaOp{Op: &pb.MetaOp_Delete{Delete: &pb.DeleteRequest{Caller: alice, Path: "/d/b"}}},
		&pb.MetaOp{Op: &pb.MetaOp_Delete{Delete: &pb.DeleteRequest{Caller: alice, Path: "/d/missing"}}},
	)
	check("batch", resp.Results[0].GetDelete().GetParent())
	if resultKind(resp.Results[1]) == ok || resp.Results[1].GetDelete() != nil {
		t.Errorf("delete of a missing name: %v", resp.Results[1])
	}
}

// TestCreateReturnsParent: a create, unary or in a batch, a file's with
// its first chunk or a symbolic link's, answers with its parent directory
// as a stat right after gives it; a failed create in a batch answers an
// error alone.
func TestCreateReturnsParent(t *testing.T) {
	tm := startMaster(t, "", nil)
	if _, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/d", Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	check := func(how string, got *pb.FileInfo) {
		t.Helper()
		checkParent(t, tm, "/d", how, got)
	}
	tm.clock.Advance(time.Second) // the directory's times move with each create
	c, err := tm.c.Create(bg, &pb.CreateRequest{Caller: alice, Path: "/d/a", Mode: 0o644, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	check("unary", c.Parent)

	tm.clock.Advance(time.Second)
	resp := tm.batch(
		&pb.MetaOp{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: alice, Path: "/d/b", Mode: 0o644, Exclusive: true, FirstChunk: true}}},
		&pb.MetaOp{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: alice, Path: "/d/a", Mode: 0o644, Exclusive: true}}},
		&pb.MetaOp{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: alice, Path: "/d/l", Mode: 0o777, Exclusive: true, SymlinkTarget: "a"}}},
	)
	check("batch, first chunk", resp.Results[0].GetCreate().GetParent())
	if resultKind(resp.Results[1]) == ok || resp.Results[1].GetCreate() != nil {
		t.Errorf("exclusive create of an existing name: %v", resp.Results[1])
	}
	check("batch, symbolic link", resp.Results[2].GetCreate().GetParent())
}

// TestMkdirReturnsParent: a mkdir, unary or in a batch, answers with its
// parent directory as a stat right after gives it; a failed mkdir in a
// batch answers an error alone.
func TestMkdirReturnsParent(t *testing.T) {
	tm := startMaster(t, "", nil)
	if _, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/d", Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	check := func(how string, got *pb.FileInfo) {
		t.Helper()
		checkParent(t, tm, "/d", how, got)
	}
	tm.clock.Advance(time.Second) // the directory's times and links move with each mkdir
	r, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: alice, Path: "/d/a", Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	check("unary", r.Parent)

	tm.clock.Advance(time.Second)
	resp := tm.batch(
		&pb.MetaOp{Op: &pb.MetaOp_Mkdir{Mkdir: &pb.MkdirRequest{Caller: alice, Path: "/d/b", Mode: 0o755}}},
		&pb.MetaOp{Op: &pb.MetaOp_Mkdir{Mkdir: &pb.MkdirRequest{Caller: alice, Path: "/d/a", Mode: 0o755}}},
	)
	check("batch", resp.Results[0].GetMkdir().GetParent())
	if resultKind(resp.Results[1]) == ok || resp.Results[1].GetMkdir() != nil {
		t.Errorf("mkdir of an existing name: %v", resp.Results[1])
	}
}

// checkParent fails t unless got, a call's answer of directory dir, is
// what a stat of dir right after says.
func checkParent(t *testing.T, tm *testMaster, dir, how string, got *pb.FileInfo) {
	t.Helper()
	st, err := tm.c.Stat(bg, &pb.StatRequest{Caller: alice, Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := st.Info
	if got == nil || got.Inode != want.Inode || got.MtimeNs != want.MtimeNs || got.CtimeNs != want.CtimeNs ||
		got.Length != want.Length || got.Nlink != want.Nlink || got.Mode != want.Mode {
		t.Errorf("%s: parent %v, a stat says %v", how, got, want)
	}
}
