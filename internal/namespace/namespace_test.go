package namespace

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
)

const testChunk = 1 << 20

var (
	alice = chunkfs.Caller{UID: 1000, GIDs: []uint32{100}}
	bob   = chunkfs.Caller{UID: 1001, GIDs: []uint32{101}}
	carol = chunkfs.Caller{UID: 1002, GIDs: []uint32{100}} // alice's group
)

// tns is a namespace under test with a clock of its own.
type tns struct {
	t   *testing.T
	ns  *Namespace
	now int64
}

// newTNS returns an initialised namespace with /home (0777, sticky) and
// /alice (owned by alice, 0755). Cleanup checks it and round-trips it
// through a snapshot.
func newTNS(t *testing.T) *tns {
	t.Helper()
	s := &tns{t: t, ns: New(), now: 1_000_000_000}
	s.ok(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
	s.ok(&Command{Op: OpMkdir, Path: "/home", Mode: uint32(0o777 | fs.ModeSticky)})
	s.ok(&Command{Op: OpMkdir, Path: "/alice", Mode: 0o755})
	s.ok(&Command{Op: OpSetAttr, Path: "/alice", Set: SetUID | SetGID, UID: 1000, GID: 100})
	t.Cleanup(s.verify)
	return s
}

func (s *tns) verify() {
	if err := s.ns.Check(); err != nil {
		s.t.Fatal(err)
	}
	a := snapshot(s.t, s.ns)
	var frozen bytes.Buffer
	if err := s.ns.Freeze().Write(&frozen); err != nil || !bytes.Equal(frozen.Bytes(), a) {
		s.t.Fatalf("a frozen checkpoint differs from the snapshot (%v)", err)
	}
	ns2, err := Restore(bytes.NewReader(a))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := ns2.Check(); err != nil {
		s.t.Fatal(err)
	}
	if b := snapshot(s.t, ns2); !bytes.Equal(a, b) {
		s.t.Fatal("snapshot → restore → snapshot differs")
	}
}

func snapshot(t testing.TB, ns *Namespace) []byte {
	var b bytes.Buffer
	if err := ns.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// apply stamps c with the next time, sends it through the encoding, and
// applies it.
func (s *tns) apply(c *Command) Result {
	s.t.Helper()
	s.now += 1000
	c.Time = s.now
	d, err := DecodeCommand(c.Encode(nil))
	if err != nil {
		s.t.Fatalf("%v: %v", c.Op, err)
	}
	return s.ns.Apply(d)
}

func (s *tns) ok(c *Command) Result {
	s.t.Helper()
	r := s.apply(c)
	if r.Err != nil {
		s.t.Fatalf("%v %s: %v", c.Op, c.Path, r.Err)
	}
	return r
}

// fails applies c, expects an error of kind k, and checks nothing changed.
func (s *tns) fails(c *Command, k chunkfs.Kind) {
	s.t.Helper()
	before := snapshot(s.t, s.ns)
	r := s.apply(c)
	if r.Err == nil || chunkfs.KindOf(r.Err) != k {
		s.t.Fatalf("%v %s: err %v, want kind %v", c.Op, c.Path, r.Err, k)
	}
	if !bytes.Equal(before, snapshot(s.t, s.ns)) {
		s.t.Fatalf("%v %s failed (%v) but changed the state", c.Op, c.Path, r.Err)
	}
}

func (s *tns) stat(c chunkfs.Caller, p string) chunkfs.FileInfo {
	s.t.Helper()
	fi, err := s.ns.Stat(c, p)
	if err != nil {
		s.t.Fatal(err)
	}
	return fi
}

func TestValidatePath(t *testing.T) {
	long := "/" + strings.Repeat("a", 256)
	huge := strings.Repeat("/abcdefg", chunkfs.MaxPathLen/8+1) // one segment over the limit
	for _, p := range []string{"", "a", "a/b", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/..", "/.", "/a\x00b", long, huge} {
		err := ValidatePath("op", p)
		if chunkfs.KindOf(err) != chunkfs.KindInvalid {
			t.Errorf("ValidatePath(%q) = %v, want invalid", p, err)
			continue
		}
		if e := err.(*chunkfs.Error); e.Path == "" && p != "" || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q does not name the path on one line", err)
		}
	}
	for _, p := range []string{"/", "/a", "/a/b.c", "/" + strings.Repeat("a", 255), "/a b/ü"} {
		if err := ValidatePath("op", p); err != nil {
			t.Errorf("ValidatePath(%q) = %v", p, err)
		}
	}
}

func TestInvalidPathsChangeNothing(t *testing.T) {
	s := newTNS(t)
	for _, p := range []string{"", "rel", "/home/", "/home/../x", "/a\x00"} {
		s.fails(&Command{Op: OpMkdir, Path: p}, chunkfs.KindInvalid)
		s.fails(&Command{Op: OpCreate, Path: p}, chunkfs.KindInvalid)
		s.fails(&Command{Op: OpDelete, Path: p}, chunkfs.KindInvalid)
		s.fails(&Command{Op: OpRename, Path: "/home", Target: p}, chunkfs.KindInvalid)
	}
}

func TestMkdirAndCreate(t *testing.T) {
	s := newTNS(t)
	r := s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/a/b/c", Mode: 0o750, Flags: FlagParents})
	if !r.Created || r.Info.FileMode != fs.ModeDir|0o750 || r.Info.UID != 1000 || r.Info.GID != 100 {
		t.Fatalf("mkdir -p: %+v", r)
	}
	if fi := s.stat(alice, "/alice/a"); fi.FileMode != fs.ModeDir|0o750|0o300 {
		t.Errorf("parent mode %v", fi.FileMode)
	}
	if r := s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/a/b", Flags: FlagParents}); r.Created {
		t.Error("mkdir -p of an existing dir created")
	}
	s.fails(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/a/b"}, chunkfs.KindExist)
	s.fails(&Command{Op: OpMkdir, Caller: bob, Path: "/alice/x"}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpMkdir, Caller: bob, Path: "/alice/x/y/z", Flags: FlagParents}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpMkdir, Caller: alice, Path: "/nope/x"}, chunkfs.KindNotExist)

	r = s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	if !r.Created || r.Info.Replication != 3 || r.Info.Inode == 0 {
		t.Fatalf("create: %+v", r)
	}
	if r2 := s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f"}); r2.Created || r2.Info.Inode != r.Info.Inode {
		t.Errorf("open-create of existing file: %+v", r2)
	}
	s.fails(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Flags: FlagExclusive}, chunkfs.KindExist)
	s.fails(&Command{Op: OpCreate, Caller: alice, Path: "/alice/a", Flags: FlagTruncate}, chunkfs.KindIsDir)
	s.fails(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f/x"}, chunkfs.KindNotDir)
	s.fails(&Command{Op: OpCreate, Caller: alice, Path: "/alice/g", Replication: 17}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpCreate, Caller: bob, Path: "/alice/f", Flags: FlagTruncate}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpCreate, Caller: bob, Path: "/alice/g"}, chunkfs.KindPermission)

	r = s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/l", Target: "../some/where"})
	if r.Info.FileMode.Type() != fs.ModeSymlink || r.Info.Target != "../some/where" || r.Info.Length != 13 {
		t.Errorf("symlink: %+v", r.Info)
	}
	s.fails(&Command{Op: OpCreate, Caller: alice, Path: "/alice/l/x"}, chunkfs.KindNotDir)
	s.fails(&Command{Op: OpCreate, Caller: alice, Path: "/alice/l2", Target: "a\x00b"}, chunkfs.KindInvalid)
}

func TestSetgidDirectory(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpMkdir, Path: "/shared", Mode: uint32(0o777 | fs.ModeSetgid)})
	s.ok(&Command{Op: OpSetAttr, Path: "/shared", Set: SetGID, GID: 555})
	f := s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/shared/f"}).Info
	d := s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/shared/d", Mode: 0o755}).Info
	if f.GID != 555 || d.GID != 555 || d.FileMode&fs.ModeSetgid == 0 {
		t.Errorf("setgid inheritance: file %d, dir %d %v", f.GID, d.GID, d.FileMode)
	}
}

func TestListPaging(t *testing.T) {
	s := newTNS(t)
	const n = 2500
	for i := range n {
		s.ok(&Command{Op: OpCreate, Path: fmt.Sprintf("/home/f%05d", (i*7919)%n), Mode: 0o644})
	}
	var names []string
	after := ""
	for pages := 0; ; pages++ {
		page, more, err := s.ns.List(chunkfs.Root, "/home", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, fi := range page {
			names = append(names, fi.FileName)
		}
		if !more {
			break
		}
		after = page[len(page)-1].FileName
		if pages > n {
			t.Fatal("paging does not end")
		}
	}
	if len(names) != n {
		t.Fatalf("listed %d names, want %d", len(names), n)
	}
	for i, name := range names {
		if want := fmt.Sprintf("f%05d", i); name != want {
			t.Fatalf("entry %d = %s, want %s", i, name, want)
		}
	}
	if page, more, _ := s.ns.List(chunkfs.Root, "/home", "f01000", 2); len(page) != 2 || page[0].FileName != "f01001" || !more {
		t.Errorf("page after f01000: %v more=%v", page, more)
	}
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/private", Mode: 0o300})
	if _, _, err := s.ns.List(bob, "/alice/private", "", 0); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("list without read permission: %v", err)
	}
	if _, _, err := s.ns.List(chunkfs.Root, "/home/f00001", "", 0); chunkfs.KindOf(err) != chunkfs.KindNotDir {
		t.Errorf("list of a file: %v", err)
	}
}

func TestDeleteInBigDirectoryKeepsOrder(t *testing.T) {
	s := newTNS(t)
	for i := range 3000 {
		s.ok(&Command{Op: OpCreate, Path: fmt.Sprintf("/home/%04d", i)})
	}
	for i := 0; i < 3000; i += 3 {
		s.ok(&Command{Op: OpDelete, Path: fmt.Sprintf("/home/%04d", i)})
	}
	page, _, _ := s.ns.List(chunkfs.Root, "/home", "", 0)
	if len(page) != 1000 || page[0].FileName != "0001" || page[2].FileName != "0004" {
		t.Errorf("first entries after deletes: %v %v", page[0].FileName, page[2].FileName)
	}
}

func TestRename(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpMkdir, Path: "/a/b/c", Flags: FlagParents, Mode: 0o755})
	f := s.ok(&Command{Op: OpCreate, Path: "/a/b/c/f"}).Info
	s.ok(&Command{Op: OpAllocChunk, Path: "/a/b/c/f"})
	s.ok(&Command{Op: OpRename, Path: "/a/b", Target: "/x"})
	if fi := s.stat(chunkfs.Root, "/x/c/f"); fi.Inode != f.Inode {
		t.Errorf("inode changed across rename: %d → %d", f.Inode, fi.Inode)
	}
	if _, err := s.ns.Stat(chunkfs.Root, "/a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old path: %v", err)
	}
	s.fails(&Command{Op: OpRename, Path: "/x", Target: "/x/c/y"}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpRename, Path: "/", Target: "/y"}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpRename, Path: "/nope", Target: "/y"}, chunkfs.KindNotExist)
	s.fails(&Command{Op: OpRename, Path: "/x", Target: "/nope/y"}, chunkfs.KindNotExist)

	// Replace a file: its chunks become garbage.
	g := s.ok(&Command{Op: OpCreate, Path: "/g"}).Info
	s.ok(&Command{Op: OpAllocChunk, Path: "/g"})
	s.fails(&Command{Op: OpRename, Path: "/x/c/f", Target: "/g", Flags: FlagNoReplace}, chunkfs.KindExist)
	r := s.ok(&Command{Op: OpRename, Path: "/x/c/f", Target: "/g"})
	if len(r.Garbage) != 1 || s.stat(chunkfs.Root, "/g").Inode == g.Inode {
		t.Errorf("replace: %+v", r)
	}
	// Directories: replace an empty one, refuse a non-empty one, refuse mixing types.
	s.ok(&Command{Op: OpMkdir, Path: "/e"})
	s.fails(&Command{Op: OpRename, Path: "/g", Target: "/e"}, chunkfs.KindIsDir)
	s.fails(&Command{Op: OpRename, Path: "/e", Target: "/g"}, chunkfs.KindNotDir)
	s.ok(&Command{Op: OpRename, Path: "/e", Target: "/x/c"})
	s.fails(&Command{Op: OpRename, Path: "/home", Target: "/x"}, chunkfs.KindNotEmpty)
	s.ok(&Command{Op: OpRename, Path: "/g", Target: "/g"})

	// Sticky /home: bob cannot move alice's file.
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/af"})
	s.fails(&Command{Op: OpRename, Caller: bob, Path: "/home/af", Target: "/home/bf"}, chunkfs.KindPermission)
	s.ok(&Command{Op: OpRename, Caller: alice, Path: "/home/af", Target: "/home/af2"})
}

func TestDelete(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/d/e", Flags: FlagParents, Mode: 0o755})
	for i := range 3 {
		p := fmt.Sprintf("/alice/d/e/f%d", i)
		s.ok(&Command{Op: OpCreate, Caller: alice, Path: p, Mode: 0o644})
		s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: p, Index: 2})
	}
	s.fails(&Command{Op: OpDelete, Caller: alice, Path: "/alice/d"}, chunkfs.KindNotEmpty)
	s.fails(&Command{Op: OpDelete, Caller: alice, Path: "/alice/d", Flags: FlagFileOnly}, chunkfs.KindIsDir)
	s.fails(&Command{Op: OpDelete, Caller: alice, Path: "/alice/d/e/f0", Flags: FlagDirOnly}, chunkfs.KindNotDir)
	s.fails(&Command{Op: OpDelete, Caller: bob, Path: "/alice/d", Flags: FlagRecursive}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpDelete, Path: "/"}, chunkfs.KindInvalid)
	s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/d/e", Set: SetMode, Mode: 0o555})
	s.fails(&Command{Op: OpDelete, Caller: alice, Path: "/alice/d", Flags: FlagRecursive}, chunkfs.KindPermission)
	s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/d/e", Set: SetMode, Mode: 0o755})
	before := s.ns.Counts()
	r := s.ok(&Command{Op: OpDelete, Caller: alice, Path: "/alice/d", Flags: FlagRecursive})
	if len(r.Garbage) != 3 {
		t.Errorf("garbage %v, want 3 handles", r.Garbage)
	}
	after := s.ns.Counts()
	if before.Files-after.Files != 3 || before.Dirs-after.Dirs != 2 || after.Chunks != 0 {
		t.Errorf("counts %+v → %+v", before, after)
	}
}

func TestSetAttr(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	s.fails(&Command{Op: OpSetAttr, Caller: bob, Path: "/alice/f", Set: SetMode, Mode: 0o777}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetUID, UID: 1001}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetGID, GID: 101}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpSetAttr, Caller: carol, Path: "/alice/f", Set: SetLength, Length: 5}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetReplication, Replication: 0}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetLength, Length: -1}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice", Set: SetLength, Length: 1}, chunkfs.KindIsDir)
	// A failing part makes the whole change fail.
	s.fails(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetMode | SetUID, Mode: 0o600, UID: 7}, chunkfs.KindPermission)

	fi := s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetMode | SetMTime | SetReplication, Mode: 0o600, MTime: 42, Replication: 2}).Info
	if fi.FileMode != 0o600 || fi.MTime.UnixNano() != 42 || fi.Replication != 2 {
		t.Errorf("setattr: %+v", fi)
	}
	fi = s.ok(&Command{Op: OpSetAttr, Path: "/alice/f", Set: SetUID | SetGID, UID: 1001, GID: 101}).Info
	if fi.UID != 1001 || fi.GID != 101 {
		t.Errorf("chown by root: %+v", fi)
	}
}

func TestTruncateAndChunks(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	var handles []chunkfs.Handle
	for i := range int64(4) {
		r := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: i})
		if !r.Allocated || r.Chunk.Index != i || r.Chunk.Version != 1 {
			t.Fatalf("alloc %d: %+v", i, r)
		}
		handles = append(handles, r.Chunk.Handle)
	}
	if r := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 2}); r.Allocated || r.Chunk.Handle != handles[2] {
		t.Errorf("re-alloc of an existing chunk: %+v", r)
	}
	s.ok(&Command{Op: OpCommitLength, Caller: alice, Path: "/alice/f", Length: 4 * testChunk})
	s.ok(&Command{Op: OpCommitLength, Caller: alice, Path: "/alice/f", Length: 10})
	if fi := s.stat(alice, "/alice/f"); fi.Length != 4*testChunk || fi.Chunks != 4 {
		t.Errorf("commit length is not a max: %+v", fi)
	}
	r := s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetLength, Length: testChunk + 100})
	if len(r.Garbage) != 2 || r.Garbage[0] != handles[2] || r.Cut == nil || r.Cut.Handle != handles[1] || r.Cut.Version != 2 || r.Cut.Length != 100 {
		t.Fatalf("truncate: garbage %v cut %+v", r.Garbage, r.Cut)
	}
	if v, ok := s.ns.ChunkVersion(handles[1]); !ok || v != 1 {
		t.Errorf("cut chunk version %d %v before the master logs it", v, ok)
	}
	// Truncating to the same length cuts again (a retry after no replica
	// could be cut).
	if r := s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetLength, Length: testChunk + 100}); r.Cut == nil || r.Cut.Handle != handles[1] || r.Cut.Version != 2 || r.Cut.Length != 100 || len(r.Garbage) != 0 {
		t.Errorf("truncate to the same length: %+v", r)
	}
	if r := s.ok(&Command{Op: OpSetVersion, Handle: handles[1], Version: 2}); r.Chunk.Version != 2 {
		t.Errorf("set version: %+v", r.Chunk)
	}
	if r := s.ok(&Command{Op: OpSetVersion, Handle: handles[1], Version: 1}); r.Chunk.Version != 2 {
		t.Errorf("set version lowered it: %+v", r.Chunk)
	}
	s.fails(&Command{Op: OpSetVersion, Handle: 424242, Version: 5}, chunkfs.KindNotExist)
	if _, ok := s.ns.ChunkVersion(handles[3]); ok {
		t.Error("dropped chunk still known")
	}
	// Extending is sparse; truncating on a chunk boundary cuts nothing.
	r = s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetLength, Length: 10 * testChunk})
	if r.Cut != nil || len(r.Garbage) != 0 {
		t.Errorf("extend: %+v", r)
	}
	r = s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetLength, Length: testChunk})
	if r.Cut != nil || len(r.Garbage) != 1 || r.Garbage[0] != handles[1] {
		t.Errorf("truncate on boundary: %+v", r)
	}
	// Append allocation: only the last chunk or the next one.
	s.fails(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 3, Flags: FlagAppend}, chunkfs.KindStale)
	if r := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 1, Flags: FlagAppend}); !r.Allocated {
		t.Error("append alloc of the next chunk")
	}
	if r := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 1, Flags: FlagAppend}); r.Allocated {
		t.Error("second append alloc of the same chunk allocated again")
	}
	// Holes.
	s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 5})
	_, cs, err := s.ns.Chunks(alice, "/alice/f", 0, 0, false)
	if err != nil || len(cs) != 3 || cs[2].Index != 5 {
		t.Errorf("chunks with holes: %+v %v", cs, err)
	}
	b := s.ok(&Command{Op: OpBumpVersion, Handle: cs[0].Handle}).Chunk
	if b.Version != 2 || b.Index != 0 {
		t.Errorf("bump: %+v", b)
	}
	s.fails(&Command{Op: OpBumpVersion, Handle: 99999}, chunkfs.KindNotExist)
	s.fails(&Command{Op: OpAllocChunk, Caller: bob, Path: "/alice/f"}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: MaxFileChunks}, chunkfs.KindInvalid)
	if _, _, err := s.ns.Chunks(bob, "/alice/f", 0, 0, true); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("chunks for write without permission: %v", err)
	}
	// Create with truncate drops everything.
	r = s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Flags: FlagTruncate})
	if len(r.Garbage) != 3 || r.Info.Length != 0 || r.Info.Chunks != 0 {
		t.Errorf("O_TRUNC: %+v", r)
	}
	if s.ns.NextHandle() <= handles[3] {
		t.Error("handle counter went back")
	}
}

func TestLeaseHorizonAndInit(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpLeaseHorizon, Horizon: 500})
	s.ok(&Command{Op: OpLeaseHorizon, Horizon: 300})
	if s.ns.LeaseHorizon() != 500 {
		t.Errorf("horizon %d", s.ns.LeaseHorizon())
	}
	s.fails(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3}, chunkfs.KindExist)
	fresh := New()
	if r := fresh.Apply(&Command{Op: OpInit, ChunkSize: 10, Replication: 3}); chunkfs.KindOf(r.Err) != chunkfs.KindInvalid {
		t.Errorf("tiny chunk size: %v", r.Err)
	}
}

// TestCreateFirstChunk checks FlagFirstChunk: a create that makes a
// regular file, or truncates one, allocates its chunk 0 in the same
// command; a create that finds the file, fails, or makes anything else
// allocates nothing.
func TestCreateFirstChunk(t *testing.T) {
	s := newTNS(t)
	r := s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o444, Flags: FlagFirstChunk})
	if !r.Created || !r.Allocated || r.Chunk.Index != 0 || r.Chunk.Version != 1 || r.Chunk.Handle == 0 || r.Info.Chunks != 1 || r.Info.Length != 0 {
		t.Fatalf("create with first chunk: %+v", r)
	}
	first := r.Chunk.Handle
	// The allocation it saved finds the chunk.
	if a := s.ok(&Command{Op: OpAllocChunk, Caller: chunkfs.Root, Path: "/alice/f"}); a.Allocated || a.Chunk.Handle != first {
		t.Fatalf("alloc after a create with first chunk: %+v", a)
	}
	// Opening it again allocates nothing; so does a failed exclusive create.
	if r := s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Flags: FlagFirstChunk}); r.Allocated || r.Created {
		t.Fatalf("create of an existing file: %+v", r)
	}
	s.fails(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Flags: FlagFirstChunk | FlagExclusive}, chunkfs.KindExist)
	// A truncating create frees the old chunk 0 and allocates a new one.
	s.ok(&Command{Op: OpCommitLength, Caller: chunkfs.Root, Path: "/alice/f", Length: 10})
	s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetMode, Mode: 0o644})
	r = s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Flags: FlagFirstChunk | FlagTruncate})
	if !r.Allocated || r.Chunk.Handle == first || len(r.Garbage) != 1 || r.Garbage[0] != first || r.Info.Length != 0 || r.Info.Chunks != 1 {
		t.Fatalf("truncating create with first chunk: %+v", r)
	}
	// No chunk for a symbolic link, a fifo, or a create without the flag.
	for _, c := range []*Command{
		{Op: OpCreate, Caller: alice, Path: "/alice/l", Target: "f", Flags: FlagFirstChunk},
		{Op: OpCreate, Caller: alice, Path: "/alice/p", Mode: uint32(fs.ModeNamedPipe | 0o644), Flags: FlagFirstChunk},
		{Op: OpCreate, Caller: alice, Path: "/alice/g", Mode: 0o644},
	} {
		if r := s.ok(c); r.Allocated || r.Info.Chunks != 0 {
			t.Errorf("create %s: %+v", c.Path, r)
		}
	}
	// Permission is the create's: alice may not create in /, so nothing.
	s.fails(&Command{Op: OpCreate, Caller: alice, Path: "/f", Flags: FlagFirstChunk}, chunkfs.KindPermission)
}

// TestCommitLengthSetsChosenMtime: a commit carrying MTime sets that
// mtime (ctime now), as a setattr of mtime just after it would, and only
// for the owner: anyone else's fails whole, changing nothing.
func TestCommitLengthSetsChosenMtime(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/f", Mode: 0o666})
	r := s.ok(&Command{Op: OpCommitLength, Caller: alice, Path: "/home/f", Length: 10, Flags: FlagTouch, MTime: 5_000})
	if r.Info.Length != 10 || r.Info.MTime.UnixNano() != 5_000 || r.Info.CTime.UnixNano() != s.now {
		t.Fatalf("commit with mtime: length %d mtime %d ctime %d (now %d)", r.Info.Length, r.Info.MTime.UnixNano(), r.Info.CTime.UnixNano(), s.now)
	}
	s.fails(&Command{Op: OpCommitLength, Caller: bob, Path: "/home/f", Length: 20, Flags: FlagTouch, MTime: 6_000}, chunkfs.KindPermission)
	if r := s.ok(&Command{Op: OpCommitLength, Caller: bob, Path: "/home/f", Length: 20, Flags: FlagTouch}); r.Info.MTime.UnixNano() != s.now {
		t.Fatalf("commit by a writer, mtime now: %d", r.Info.MTime.UnixNano())
	}
}

// TestInodeNumbersUsedUp brings the inode counter next to MaxInode: the
// last number goes to one create, and a create, mkdir, mkdir -p and
// snapshot after it fail with no space and change nothing.
func TestInodeNumbersUsedUp(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Path: "/home/f", Mode: 0o644})
	s.ns.nextInode = MaxInode - 1
	info := s.ok(&Command{Op: OpCreate, Path: "/home/last", Mode: 0o644}).Info
	if info.Inode != MaxInode-1 {
		t.Fatalf("the last inode is numbered %d, want %d", info.Inode, uint64(MaxInode-1))
	}
	if got := s.ns.lookupForTest("/home/last").ino(); got != MaxInode-1 {
		t.Fatalf("inode number kept as %d", got)
	}
	before := snapshot(t, s.ns)
	for _, c := range []*Command{
		{Op: OpCreate, Path: "/home/g", Mode: 0o644},
		{Op: OpMkdir, Path: "/home/d", Mode: 0o755},
		{Op: OpMkdir, Path: "/home/d/e", Mode: 0o755, Flags: FlagParents},
		{Op: OpSnapshot, Path: "/home/f", Target: "/home/s"},
	} {
		if r := s.ns.Apply(c); chunkfs.KindOf(r.Err) != chunkfs.KindNoSpace {
			t.Errorf("%v %s: %v, want no space", c.Op, c.Path, r.Err)
		}
	}
	if !bytes.Equal(snapshot(t, s.ns), before) {
		t.Fatal("a refused create changed the namespace")
	}
}
