package master

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

func TestLinkOverRPC(t *testing.T) {
	tm := startMaster(t, "", nil)
	for _, id := range []string{"a", "b", "c"} {
		tm.startCS(id, "r"+id)
	}
	if _, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: alice, Path: "/d", Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	f := tm.create(alice, "/d/f")
	h := tm.prepare(alice, "/d/f", 0, false).Chunk.Handle
	lr, err := tm.c.Link(bg, &pb.LinkRequest{Caller: alice, Src: "/d/f", Dst: "/d/g"})
	if err != nil || lr.StateId == 0 || lr.Info.Inode != f.Inode || lr.Info.Nlink != 2 || lr.Info.Name != "g" {
		t.Fatalf("link: %v %v", lr, err)
	}
	st, err := tm.c.Stat(bg, &pb.StatRequest{Caller: alice, Path: "/d/f", MinStateId: lr.StateId})
	if err != nil || st.Info.Nlink != 2 || st.Info.Inode != f.Inode {
		t.Fatalf("stat of the first name: %v %v", st, err)
	}
	// fsck checks the file once, under its first name.
	if r, err := tm.c.Fsck(bg, &pb.FsckRequest{Caller: alice, Path: "/"}); err != nil || r.FilesChecked != 1 || r.Chunks != 1 || r.Files[0].Path != "/d/f" {
		t.Errorf("fsck of a file with two names: %+v %v", r, err)
	}

	for _, tc := range []struct {
		c        *pb.Caller
		src, dst string
		want     chunkfs.Kind
	}{
		{alice, "/d/nope", "/d/h", chunkfs.KindNotExist},
		{alice, "/d/f", "/d/g", chunkfs.KindExist},
		{alice, "/d/f", "/nope/h", chunkfs.KindNotExist},
		{root, "/d", "/d2", chunkfs.KindPermission}, // a directory
		{bob, "/d/f", "/d/h", chunkfs.KindPermission},
		{alice, "/d/f", "/d/../h", chunkfs.KindInvalid},
		{alice, "d/f", "/d/h", chunkfs.KindInvalid},
		{alice, "/d/f", "/d/" + strings.Repeat("n", 256), chunkfs.KindInvalid},
	} {
		_, err := tm.c.Link(bg, &pb.LinkRequest{Caller: tc.c, Src: tc.src, Dst: tc.dst})
		if kindOf(err) != tc.want || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "link ") {
			t.Errorf("link %s %s: %v, want one line of kind %v", tc.src, tc.dst, err, tc.want)
		}
	}

	// Removing the first name keeps the chunk: it is the inode's.
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: "/d/f"}); err != nil {
		t.Fatal(err)
	}
	gc, err := tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: "/d/g"})
	if err != nil || len(gc.Chunks) != 1 || gc.Chunks[0].Handle != h || gc.Info.Nlink != 1 {
		t.Fatalf("chunks through the remaining name: %v %v", gc, err)
	}
	if _, err := tm.c.Stat(bg, &pb.StatRequest{Caller: alice, Path: "/d/f"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed name: %v", err)
	}
}

// TestLinksSurviveRestart: links made before a snapshot and after it (in
// the log only) are there after a restart.
func TestLinksSurviveRestart(t *testing.T) {
	tm := startMaster(t, "", nil)
	f := tm.create(root, "/f")
	if _, err := tm.c.Link(bg, &pb.LinkRequest{Caller: root, Src: "/f", Dst: "/g"}); err != nil {
		t.Fatal(err)
	}
	if err := tm.m.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.c.Link(bg, &pb.LinkRequest{Caller: root, Src: "/g", Dst: "/h"}); err != nil {
		t.Fatal(err)
	}
	tm.close()
	tm2 := startMaster(t, tm.cfg.Dir, tm.clock)
	for _, p := range []string{"/f", "/g", "/h"} {
		st, err := tm2.c.Stat(bg, &pb.StatRequest{Caller: root, Path: p})
		if err != nil || st.Info.Inode != f.Inode || st.Info.Nlink != 3 {
			t.Errorf("%s after restart: %v %v", p, st, err)
		}
	}
}
