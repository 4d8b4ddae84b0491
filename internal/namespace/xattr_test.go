package namespace

import (
	"bytes"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
)

func (s *tns) setXattr(c chunkfs.Caller, p, name, value string, flags uint8) Result {
	s.t.Helper()
	return s.apply(&Command{Op: OpSetXattr, Caller: c, Path: p, Target: name, Value: []byte(value), Set: flags})
}

func TestXattrSetGetListRemove(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/f", Mode: 0o644})
	before := s.stat(alice, "/home/f").CTime
	if r := s.setXattr(alice, "/home/f", "user.color", "blue", 0); r.Err != nil {
		t.Fatal(r.Err)
	}
	if s.stat(alice, "/home/f").CTime == before {
		t.Error("setxattr did not change ctime")
	}
	s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.empty", Value: []byte{}})
	s.ok(&Command{Op: OpSetXattr, Path: "/home/f", Target: "trusted.t", Value: []byte("x")})
	v, err := s.ns.Xattr(alice, "/home/f", "user.color")
	if err != nil || string(v) != "blue" {
		t.Fatalf("get user.color = %q, %v", v, err)
	}
	if v, err := s.ns.Xattr(alice, "/home/f", "user.empty"); err != nil || len(v) != 0 {
		t.Fatalf("get user.empty = %q, %v", v, err)
	}
	names, _ := s.ns.Xattrs(alice, "/home/f")
	if !slices.Equal(names, []string{"user.color", "user.empty"}) {
		t.Errorf("alice lists %q (trusted.* must be hidden)", names)
	}
	names, _ = s.ns.Xattrs(chunkfs.Root, "/home/f")
	if !slices.Equal(names, []string{"trusted.t", "user.color", "user.empty"}) {
		t.Errorf("root lists %q", names)
	}
	// Flags: create fails on an existing one, replace on a missing one.
	s.fails(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.color", Value: []byte("red"), Set: XattrCreate}, chunkfs.KindExist)
	s.fails(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.none", Value: []byte("red"), Set: XattrReplace}, chunkfs.KindNoAttr)
	s.fails(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.none", Set: XattrCreate | XattrReplace}, chunkfs.KindInvalid)
	s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.color", Value: []byte("red"), Set: XattrReplace})
	if v, _ := s.ns.Xattr(alice, "/home/f", "user.color"); string(v) != "red" {
		t.Errorf("after replace: %q", v)
	}
	s.ok(&Command{Op: OpRemoveXattr, Caller: alice, Path: "/home/f", Target: "user.color"})
	s.fails(&Command{Op: OpRemoveXattr, Caller: alice, Path: "/home/f", Target: "user.color"}, chunkfs.KindNoAttr)
	if _, err := s.ns.Xattr(alice, "/home/f", "user.color"); chunkfs.KindOf(err) != chunkfs.KindNoAttr {
		t.Errorf("get removed: %v", err)
	}
	// Removing the last attribute leaves a plain file (Check verifies the ext is gone).
	s.ok(&Command{Op: OpRemoveXattr, Caller: alice, Path: "/home/f", Target: "user.empty"})
	s.ok(&Command{Op: OpRemoveXattr, Path: "/home/f", Target: "trusted.t"})
	if s.ns.lookupForTest("/home/f").ext() != nil {
		t.Error("a file without attributes keeps an ext")
	}
}

func (ns *Namespace) lookupForTest(p string) *inode {
	_, n, err := ns.existing("test", &chunkfs.Root, p)
	if err != nil {
		panic(err)
	}
	return n
}

func TestXattrPermissions(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/f", Mode: 0o640})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/link", Target: "f"})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/fifo", Mode: uint32(fs.ModeNamedPipe | 0o666)})
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/home/sticky", Mode: uint32(0o777 | fs.ModeSticky)})
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/home/closed", Mode: 0o700})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/closed/f", Mode: 0o666})
	s.setXattr(alice, "/home/f", "user.a", "1", 0)
	for _, tc := range []struct {
		name string
		c    *Command
		want chunkfs.Kind
	}{
		{"bob sets user. without write permission", &Command{Op: OpSetXattr, Caller: bob, Path: "/home/f", Target: "user.b", Value: []byte("x")}, chunkfs.KindPermission},
		{"carol (group) cannot write either", &Command{Op: OpSetXattr, Caller: carol, Path: "/home/f", Target: "user.b", Value: []byte("x")}, chunkfs.KindPermission},
		{"bob removes user.", &Command{Op: OpRemoveXattr, Caller: bob, Path: "/home/f", Target: "user.a"}, chunkfs.KindPermission},
		{"user. on a symbolic link", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/link", Target: "user.a", Value: []byte("x")}, chunkfs.KindPermission},
		{"user. on a fifo", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/fifo", Target: "user.a", Value: []byte("x")}, chunkfs.KindPermission},
		{"bob on alice's sticky directory", &Command{Op: OpSetXattr, Caller: bob, Path: "/home/sticky", Target: "user.a", Value: []byte("x")}, chunkfs.KindPermission},
		{"trusted. by a user", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "trusted.a", Value: []byte("x")}, chunkfs.KindPermission},
		{"security. by a user", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "security.selinux", Value: []byte("x")}, chunkfs.KindPermission},
		{"system. is not supported", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "system.posix_acl_access", Value: []byte("x")}, chunkfs.KindNotSupported},
		{"no namespace", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "color", Value: []byte("x")}, chunkfs.KindNotSupported},
		{"bare prefix", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.", Value: []byte("x")}, chunkfs.KindNotSupported},
		{"name too long", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user." + strings.Repeat("n", 251), Value: []byte("x")}, chunkfs.KindTooLarge},
		{"NUL in the name", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.a\x00b", Value: []byte("x")}, chunkfs.KindInvalid},
		{"no search permission on the path", &Command{Op: OpSetXattr, Caller: bob, Path: "/home/closed/f", Target: "user.a", Value: []byte("x")}, chunkfs.KindPermission},
		{"missing file", &Command{Op: OpSetXattr, Caller: alice, Path: "/home/none", Target: "user.a", Value: []byte("x")}, chunkfs.KindNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) { s.t = t; s.fails(tc.c, tc.want) })
	}
	s.t = t
	// A value over the bound cannot even be decoded from the log; applied
	// directly it is refused.
	if r := s.ns.Apply(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.big", Value: make([]byte, MaxXattrValue+1)}); chunkfs.KindOf(r.Err) != chunkfs.KindTooLarge {
		t.Errorf("value too large: %v", r.Err)
	}
	// Reading: read permission for user., anyone for security., root for trusted.
	if _, err := s.ns.Xattr(bob, "/home/f", "user.a"); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Errorf("bob reads user.a of a 0640 file: %v", err)
	}
	if v, err := s.ns.Xattr(carol, "/home/f", "user.a"); err != nil || string(v) != "1" {
		t.Errorf("carol (group read) reads user.a: %q, %v", v, err)
	}
	s.ok(&Command{Op: OpSetXattr, Path: "/home/f", Target: "security.selinux", Value: []byte("ctx")})
	if v, err := s.ns.Xattr(bob, "/home/f", "security.selinux"); err != nil || string(v) != "ctx" {
		t.Errorf("bob reads security.: %q, %v", v, err)
	}
	s.ok(&Command{Op: OpSetXattr, Path: "/home/f", Target: "trusted.t", Value: []byte("x")})
	if _, err := s.ns.Xattr(alice, "/home/f", "trusted.t"); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Errorf("alice reads trusted.: %v", err)
	}
	// The owner sets user. on its own sticky directory; root anywhere.
	s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/sticky", Target: "user.a", Value: []byte("x")})
	s.ok(&Command{Op: OpSetXattr, Path: "/home/link", Target: "trusted.a", Value: []byte("x")})
}

func TestXattrTotalBounded(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/f", Mode: 0o644})
	val := bytes.Repeat([]byte("v"), 16<<10)
	for i := range 3 {
		s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user." + string(rune('a'+i)), Value: val})
	}
	s.fails(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.d", Value: val}, chunkfs.KindNoSpace)
	// Replacing a value counts only the difference.
	s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.a", Value: val[:1]})
	s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.d", Value: val})
}

// TestXattrSnapshotV1 restores a snapshot in the format before extended
// attributes.
func TestXattrSnapshotV1(t *testing.T) {
	ns := New()
	ns.Apply(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
	ns.Apply(&Command{Op: OpMkdir, Path: "/d", Mode: 0o755})
	b := snapshot(t, ns)
	var buf bytes.Buffer
	if err := ns.snapshotAs(&buf, snapshotV1); err != nil {
		t.Fatal(err)
	}
	v1 := buf.Bytes()
	if bytes.Equal(b, v1) {
		t.Fatal("v1 and v2 snapshots are the same bytes")
	}
	got, err := Restore(bytes.NewReader(v1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := got.Stat(chunkfs.Root, "/d"); err != nil {
		t.Fatal(err)
	}
}

// TestXattrFileKeepsItsChunks gives a file of three chunks an attribute
// and takes it away again, growing the file in between and writing a
// checkpoint frozen before each change: the ext that comes and goes takes
// the chunk list over and hands it back (the inode keeps one pointer for
// both), and each checkpoint holds the file as it was at its freeze.
func TestXattrFileKeepsItsChunks(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/f", Mode: 0o644})
	alloc := func(i int64) chunkfs.Handle {
		return s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/home/f", Index: i}).Chunk.Handle
	}
	var want []chunkfs.Handle
	for i := range int64(3) {
		want = append(want, alloc(i))
	}
	same := func(when string) {
		t.Helper()
		_, cs, _ := s.ns.Chunks(alice, "/home/f", 0, 100, false)
		var got []chunkfs.Handle
		for _, c := range cs {
			got = append(got, c.Handle)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: chunks %v, want %v", when, got, want)
		}
	}
	frozen := func(change func()) {
		t.Helper()
		before := snapshot(t, s.ns)
		f := s.ns.Freeze()
		change()
		var buf bytes.Buffer
		if err := f.Write(&buf); err != nil || !bytes.Equal(buf.Bytes(), before) {
			t.Fatalf("a checkpoint frozen before the change differs from the state then (%v)", err)
		}
	}
	frozen(func() {
		s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/home/f", Target: "user.a", Value: []byte("1")})
	})
	same("with an attribute")
	frozen(func() { want = append(want, alloc(3)) })
	same("grown with an attribute")
	frozen(func() { s.ok(&Command{Op: OpRemoveXattr, Caller: alice, Path: "/home/f", Target: "user.a"}) })
	same("without it again")
	if s.ns.lookupForTest("/home/f").ext() != nil {
		t.Fatal("the file keeps an ext without attributes")
	}
	want = append(want, alloc(4))
	same("grown without it")
}
