package namespace

import (
	"bytes"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
)

func TestLink(t *testing.T) {
	s := newTNS(t)
	f := s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644}).Info
	h := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f"}).Chunk.Handle
	before := s.ns.Counts()
	r := s.ok(&Command{Op: OpLink, Caller: alice, Path: "/alice/f", Target: "/alice/g"})
	if r.Info.Inode != f.Inode || r.Info.Nlink != 2 || r.Info.FileName != "g" || r.Info.CTime.UnixNano() != s.now {
		t.Errorf("link: %+v", r.Info)
	}
	for _, p := range []string{"/alice/f", "/alice/g"} {
		if fi := s.stat(alice, p); fi.Inode != f.Inode || fi.Nlink != 2 || fi.Chunks != 1 {
			t.Errorf("%s: %+v", p, fi)
		}
	}
	if d := s.stat(alice, "/alice"); d.MTime.UnixNano() != s.now || d.CTime.UnixNano() != s.now {
		t.Errorf("directory times not updated: %+v", d)
	}
	if after := s.ns.Counts(); after != before {
		t.Errorf("a link changed the counts: %+v → %+v", before, after)
	}

	// One inode: a write through one name shows through the other.
	s.ok(&Command{Op: OpCommitLength, Caller: alice, Path: "/alice/g", Length: 100})
	if fi := s.stat(alice, "/alice/f"); fi.Length != 100 {
		t.Errorf("length through the other name: %d", fi.Length)
	}
	if _, cs, err := s.ns.Chunks(alice, "/alice/g", 0, 0, false); err != nil || len(cs) != 1 || cs[0].Handle != h {
		t.Errorf("chunks through the link: %v %v", cs, err)
	}

	// The first name goes: the inode stays, its status changed.
	r = s.ok(&Command{Op: OpDelete, Caller: alice, Path: "/alice/f"})
	if len(r.Garbage) != 0 {
		t.Errorf("unlink of one of two names freed %v", r.Garbage)
	}
	if fi := s.stat(alice, "/alice/g"); fi.Nlink != 1 || fi.CTime.UnixNano() != s.now || fi.Length != 100 {
		t.Errorf("after unlinking the other name: %+v", fi)
	}
	if _, ok := s.ns.ChunkVersion(h); !ok {
		t.Error("chunk freed while a name remains")
	}
	// The last name goes: so do the chunks.
	if r := s.ok(&Command{Op: OpDelete, Caller: alice, Path: "/alice/g"}); !slices.Equal(r.Garbage, []chunkfs.Handle{h}) {
		t.Errorf("unlink of the last name: garbage %v, want [%d]", r.Garbage, h)
	}
	if c := s.ns.Counts(); c.Files != before.Files-1 || c.Chunks != before.Chunks-1 {
		t.Errorf("counts after the last unlink: %+v", c)
	}
}

func TestLinkRefusals(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/l", Target: "f"})
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/d", Mode: 0o755})
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/closed", Mode: 0o700})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/closed/x", Mode: 0o644})
	long := strings.Repeat("n", chunkfs.MaxNameLen+1)
	for _, tc := range []struct {
		c    Command
		want chunkfs.Kind
	}{
		{Command{Caller: alice, Path: "/alice/f", Target: "/alice/l"}, chunkfs.KindExist}, // even a symbolic link
		{Command{Caller: alice, Path: "/alice/f", Target: "/alice/f"}, chunkfs.KindExist}, // itself
		{Command{Caller: alice, Path: "/alice/f", Target: "/"}, chunkfs.KindExist},        // the root
		{Command{Caller: alice, Path: "/alice/nope", Target: "/alice/g"}, chunkfs.KindNotExist},
		{Command{Caller: alice, Path: "/alice/f", Target: "/alice/nope/g"}, chunkfs.KindNotExist},
		{Command{Caller: alice, Path: "/alice/f", Target: "/alice/f/g"}, chunkfs.KindNotDir},
		{Command{Caller: alice, Path: "/alice/f", Target: "/alice/l/g"}, chunkfs.KindNotDir},
		{Command{Caller: alice, Path: "/alice/d", Target: "/alice/d2"}, chunkfs.KindPermission}, // EPERM: a directory
		{Command{Caller: chunkfs.Root, Path: "/alice/d", Target: "/alice/d2"}, chunkfs.KindPermission},
		{Command{Caller: chunkfs.Root, Path: "/", Target: "/r"}, chunkfs.KindPermission},
		{Command{Caller: bob, Path: "/alice/f", Target: "/alice/g"}, chunkfs.KindPermission},       // no write on the target directory
		{Command{Caller: bob, Path: "/alice/closed/x", Target: "/home/x"}, chunkfs.KindPermission}, // no search on the source's
		{Command{Caller: alice, Path: "/alice/f", Target: "/alice/" + long}, chunkfs.KindInvalid},  // ENAMETOOLONG
		{Command{Caller: alice, Path: "/alice/f", Target: "alice/g"}, chunkfs.KindInvalid},
		{Command{Caller: alice, Path: "/alice/f", Target: ""}, chunkfs.KindInvalid},
		{Command{Caller: alice, Path: "", Target: "/alice/g"}, chunkfs.KindInvalid},
	} {
		c := tc.c
		c.Op = OpLink
		s.fails(&c, tc.want)
		if err := s.apply(&c).Err; err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "link") {
			t.Errorf("%s → %s: error %q is not one line naming the operation", c.Path, c.Target, err)
		}
	}
	// Anyone with write permission on the target directory may link a
	// file they can reach, as POSIX has it (Linux's protected_hardlinks
	// is a local policy the kernel applies on a mount).
	if fi := s.ok(&Command{Op: OpLink, Caller: bob, Path: "/alice/f", Target: "/home/bf"}).Info; fi.UID != alice.UID || fi.Nlink != 2 {
		t.Errorf("bob's link of alice's file: %+v", fi)
	}
}

func TestLinkOtherTypes(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Path: "/l", Target: "somewhere"})
	s.ok(&Command{Op: OpCreate, Path: "/p", Mode: uint32(fs.ModeNamedPipe | 0o644)})
	s.ok(&Command{Op: OpCreate, Path: "/c", Mode: uint32(fs.ModeDevice | fs.ModeCharDevice | 0o600), Rdev: 0x0103})
	bytesBefore := s.ns.Counts().Bytes
	for _, p := range []string{"/l", "/p", "/c"} {
		fi := s.ok(&Command{Op: OpLink, Path: p, Target: p + "2"}).Info
		back := s.stat(chunkfs.Root, p+"2")
		if fi.Nlink != 2 || back.Inode != fi.Inode || back.FileMode != fi.FileMode || back.Target != fi.Target || back.Rdev != fi.Rdev {
			t.Errorf("%s: %+v, through the link %+v", p, fi, back)
		}
	}
	if b := s.ns.Counts().Bytes; b != bytesBefore {
		t.Errorf("linking a symbolic link counted its bytes again: %d → %d", bytesBefore, b)
	}
}

// TestLinkLimit: an inode has at most MaxLinks names (EMLINK).
func TestLinkLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 65,000 links")
	}
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Path: "/f"})
	s.ok(&Command{Op: OpMkdir, Path: "/many"})
	for i := 1; i < MaxLinks; i++ {
		if r := s.ns.Apply(&Command{Op: OpLink, Path: "/f", Target: fmt.Sprintf("/many/%05d", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if fi := s.stat(chunkfs.Root, "/f"); fi.Nlink != MaxLinks {
		t.Fatalf("nlink %d, want %d", fi.Nlink, MaxLinks)
	}
	s.fails(&Command{Op: OpLink, Path: "/f", Target: "/one-more"}, chunkfs.KindTooLarge)
}

func TestRenameAndLinks(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/a", Mode: 0o644})
	s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/a"})
	s.ok(&Command{Op: OpLink, Caller: alice, Path: "/alice/a", Target: "/alice/b"})

	// Renaming a name onto another name of the same inode does nothing:
	// both stay (rename(2)); so does an exchange of them.
	before := snapshot(t, s.ns)
	s.ok(&Command{Op: OpRename, Caller: alice, Path: "/alice/a", Target: "/alice/b"})
	s.ok(&Command{Op: OpRename, Caller: alice, Path: "/alice/a", Target: "/alice/b", Flags: FlagExchange})
	if !bytes.Equal(before, snapshot(t, s.ns)) {
		t.Error("rename onto a hard link of the same inode changed the state")
	}
	// Even a caller who could not remove the source gets success: rename(2)
	// decides it is one file before it checks permissions.
	s.ok(&Command{Op: OpRename, Caller: bob, Path: "/alice/a", Target: "/alice/b"})

	// Renaming another file over one of the names leaves the inode with
	// its other name, its chunk, and a new status time.
	c := s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/c"}).Info
	r := s.ok(&Command{Op: OpRename, Caller: alice, Path: "/alice/c", Target: "/alice/b"})
	if len(r.Garbage) != 0 || r.Info.Inode != c.Inode {
		t.Errorf("rename over a link: %+v", r)
	}
	if fi := s.stat(alice, "/alice/a"); fi.Nlink != 1 || fi.Chunks != 1 || fi.CTime.UnixNano() != s.now {
		t.Errorf("the other name after being renamed over: %+v", fi)
	}
	// A linked name moves to another directory as any file does.
	s.ok(&Command{Op: OpLink, Caller: alice, Path: "/alice/a", Target: "/alice/b2"})
	s.ok(&Command{Op: OpRename, Caller: alice, Path: "/alice/b2", Target: "/home/moved"})
	if fi := s.stat(alice, "/home/moved"); fi.Nlink != 2 || fi.FileName != "moved" {
		t.Errorf("moved link: %+v", fi)
	}
	// Exchanging a linked name with another file swaps the names only.
	s.ok(&Command{Op: OpRename, Caller: alice, Path: "/home/moved", Target: "/alice/b", Flags: FlagExchange})
	if a, b := s.stat(alice, "/alice/a"), s.stat(alice, "/alice/b"); a.Inode != b.Inode || a.Nlink != 2 {
		t.Errorf("exchange with a link: %+v %+v", a, b)
	}
}

func TestDeleteTreeWithLinks(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpMkdir, Path: "/d/e", Flags: FlagParents, Mode: 0o755})
	s.ok(&Command{Op: OpCreate, Path: "/d/e/in"}) // two names, both inside
	hin := s.ok(&Command{Op: OpAllocChunk, Path: "/d/e/in"}).Chunk.Handle
	s.ok(&Command{Op: OpLink, Path: "/d/e/in", Target: "/d/in2"})
	out := s.ok(&Command{Op: OpCreate, Path: "/d/out"}).Info // a name outside too
	s.ok(&Command{Op: OpAllocChunk, Path: "/d/out"})
	s.ok(&Command{Op: OpLink, Path: "/d/out", Target: "/kept"})
	before := s.ns.Counts()
	var each []chunkfs.Handle
	s.ns.EachChunk(func(h chunkfs.Handle, _ chunkfs.Version, _ int) { each = append(each, h) })
	if int64(len(each)) != before.Chunks {
		t.Errorf("EachChunk gave %v, %d chunks exist", each, before.Chunks)
	}
	r := s.ok(&Command{Op: OpDelete, Path: "/d", Flags: FlagRecursive})
	if !slices.Equal(r.Garbage, []chunkfs.Handle{hin}) {
		t.Errorf("garbage %v, want the inside file's chunk [%d] once", r.Garbage, hin)
	}
	after := s.ns.Counts()
	if before.Files-after.Files != 1 || before.Dirs-after.Dirs != 2 || after.Chunks != 1 {
		t.Errorf("counts %+v → %+v", before, after)
	}
	if fi := s.stat(chunkfs.Root, "/kept"); fi.Inode != out.Inode || fi.Nlink != 1 || fi.Chunks != 1 {
		t.Errorf("file linked from outside: %+v", fi)
	}
}

// TestSnapshotLinks: hard links survive a snapshot (newTNS's cleanup
// round-trips it); older formats, which cannot hold them, refuse to
// write one and still restore with every inode named once.
func TestSnapshotLinks(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpMkdir, Path: "/a/b", Flags: FlagParents})
	s.ok(&Command{Op: OpCreate, Path: "/a/b/f"})
	s.ok(&Command{Op: OpAllocChunk, Path: "/a/b/f"})
	s.ok(&Command{Op: OpCreate, Path: "/single"})
	var old bytes.Buffer
	if err := s.ns.snapshotAs(&old, 3); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/0first", "/a/b/g", "/home/z"} {
		s.ok(&Command{Op: OpLink, Path: "/a/b/f", Target: p})
	}
	back, err := Restore(bytes.NewReader(snapshot(t, s.ns)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/0first", "/a/b/f", "/a/b/g", "/home/z"} {
		if fi, err := back.Stat(chunkfs.Root, p); err != nil || fi.Nlink != 4 || fi.Chunks != 1 {
			t.Errorf("restored %s: %+v %v", p, fi, err)
		}
	}
	if err := s.ns.snapshotAs(&bytes.Buffer{}, 3); err == nil {
		t.Error("format 3 written with hard links")
	}
	v3, err := Restore(&old)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a/b/f", "/single"} {
		if fi, err := v3.Stat(chunkfs.Root, p); err != nil || fi.Nlink != 1 {
			t.Errorf("format 3 %s: %+v %v", p, fi, err)
		}
	}
	if r := v3.Apply(&Command{Op: OpLink, Path: "/single", Target: "/single2"}); r.Err != nil || r.Info.Nlink != 2 {
		t.Errorf("link after restoring format 3: %+v", r)
	}
}

// TestCheckCountsLinks: Check and Restore refuse a link count that does
// not match the names.
func TestCheckCountsLinks(t *testing.T) {
	build := func() (*Namespace, *inode) {
		ns := New()
		ns.Apply(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
		ns.Apply(&Command{Op: OpCreate, Path: "/f"})
		ns.Apply(&Command{Op: OpLink, Path: "/f", Target: "/g"})
		return ns, ns.root.ext().kids.get("f")
	}
	for _, tc := range []struct {
		name  string
		nlink uint16
		want  string
	}{{"too high", 3, "has 2 names, counts 3"}, {"too low", 1, "reused"}, {"zero", 0, "link count of 0"}} {
		ns, n := build()
		n.nlink = tc.nlink
		if err := ns.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v, want %q", tc.name, err, tc.want)
		}
		var buf bytes.Buffer
		if err := ns.Snapshot(&buf); err != nil {
			continue
		}
		if _, err := Restore(&buf); err == nil {
			t.Errorf("%s: restored a snapshot with a wrong link count", tc.name)
		}
	}
}
