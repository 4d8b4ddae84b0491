package namespace

import (
	"bytes"
	"slices"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// chunkOf returns the handle of chunk i of p.
func (s *tns) chunkOf(p string, i int64) Chunk {
	s.t.Helper()
	_, cs, err := s.ns.Chunks(chunkfs.Caller{}, p, i, 1, false)
	if err != nil || len(cs) != 1 {
		s.t.Fatalf("chunk %d of %s: %v %v", i, p, cs, err)
	}
	return cs[0]
}

func TestSnapshotSharesChunks(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/d", Mode: 0o755})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/d/f", Mode: 0o640})
	h0 := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/d/f", Index: 0}).Chunk.Handle
	h1 := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/d/f", Index: 1}).Chunk.Handle
	s.ok(&Command{Op: OpCommitLength, Caller: alice, Path: "/alice/d/f", Length: testChunk + 10})
	s.ok(&Command{Op: OpLink, Caller: alice, Path: "/alice/d/f", Target: "/alice/d/g"})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/d/l", Target: "f"})
	s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/alice/d/f", Target: "user.k", Value: []byte("v")})
	before := s.ns.Counts()

	r := s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/d", Target: "/alice/snap"})
	if !r.Created || !r.Info.IsDir() {
		t.Fatalf("snapshot result %+v", r)
	}
	after := s.ns.Counts()
	if after.Chunks != before.Chunks || after.Files != before.Files+2 || after.Dirs != before.Dirs+1 || after.Bytes != 2*before.Bytes {
		t.Errorf("counts %+v → %+v", before, after)
	}
	for _, h := range []chunkfs.Handle{h0, h1} {
		if n := s.ns.Refs(h); n != 2 {
			t.Errorf("chunk %d: %d references, want 2", h, n)
		}
	}
	f, g := s.stat(alice, "/alice/snap/f"), s.stat(alice, "/alice/snap/g")
	src := s.stat(alice, "/alice/d/f")
	if f.Inode == src.Inode || f.Inode != g.Inode || f.Nlink != 2 || f.Length != src.Length || f.Mode() != src.Mode() || !f.MTime.Equal(src.MTime) {
		t.Errorf("copy %+v, link %+v, source %+v", f, g, src)
	}
	if c := s.chunkOf("/alice/snap/f", 1); c.Handle != h1 || !c.Shared {
		t.Errorf("copy's chunk 1: %+v", c)
	}
	if v, err := s.ns.Xattr(alice, "/alice/snap/f", "user.k"); err != nil || string(v) != "v" {
		t.Errorf("xattr of the copy: %q %v", v, err)
	}
	// The source's attribute changes alone.
	s.ok(&Command{Op: OpSetXattr, Caller: alice, Path: "/alice/d/f", Target: "user.k", Value: []byte("w")})
	if v, _ := s.ns.Xattr(alice, "/alice/snap/f", "user.k"); string(v) != "v" {
		t.Errorf("xattr of the copy changed with the source: %q", v)
	}
	if fi := s.stat(alice, "/alice/snap/l"); fi.Target != "f" {
		t.Errorf("symbolic link copy %+v", fi)
	}

	// A version raised on a shared chunk shows in every holder.
	s.ok(&Command{Op: OpSetVersion, Handle: h0, Version: 7})
	if a, b := s.chunkOf("/alice/d/f", 0), s.chunkOf("/alice/snap/f", 0); a.Version != 7 || b.Version != 7 {
		t.Errorf("versions after set: %+v %+v", a, b)
	}
}

func TestSnapshotFreesAtZero(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	h0 := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 0}).Chunk.Handle
	h1 := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 1}).Chunk.Handle
	s.ok(&Command{Op: OpCommitLength, Caller: alice, Path: "/alice/f", Length: 2 * testChunk})
	s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/f", Target: "/alice/s1"})
	s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/f", Target: "/alice/s2"})
	if n := s.ns.Refs(h0); n != 3 {
		t.Fatalf("refs %d, want 3", n)
	}
	// Truncating one holder drops its reference only.
	if r := s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/s1", Set: SetLength, Length: testChunk}); len(r.Garbage) != 0 || r.Cut != nil {
		t.Errorf("truncate of a snapshot freed %v, cut %v", r.Garbage, r.Cut)
	}
	if n := s.ns.Refs(h1); n != 2 {
		t.Errorf("refs of the dropped chunk %d, want 2", n)
	}
	if r := s.ok(&Command{Op: OpDelete, Caller: alice, Path: "/alice/f"}); len(r.Garbage) != 0 {
		t.Errorf("deleting the source freed %v", r.Garbage)
	}
	if r := s.ok(&Command{Op: OpDelete, Caller: alice, Path: "/alice/s1"}); !slices.Equal(r.Garbage, nil) {
		t.Errorf("deleting s1 freed %v", r.Garbage)
	}
	if r := s.ok(&Command{Op: OpDelete, Caller: alice, Path: "/alice/s2"}); !slices.Equal(r.Garbage, []chunkfs.Handle{h0, h1}) {
		t.Errorf("deleting the last holder freed %v, want [%d %d]", r.Garbage, h0, h1)
	}
	if s.ns.Refs(h0) != 0 || s.ns.SharedChunks() != 0 {
		t.Errorf("refs left: %d, shared %d", s.ns.Refs(h0), s.ns.SharedChunks())
	}
}

func TestSnapshotRefusals(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/d", Mode: 0o755})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/d/f", Mode: 0o644})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/d/secret", Mode: 0o600})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/x", Mode: 0o644})
	for _, tc := range []struct {
		c    Command
		want chunkfs.Kind
	}{
		{Command{Caller: alice, Path: "/alice/d", Target: "/alice/d/in"}, chunkfs.KindInvalid},
		{Command{Caller: alice, Path: "/alice/d", Target: "/alice/d"}, chunkfs.KindInvalid},
		{Command{Path: "/", Target: "/copy"}, chunkfs.KindInvalid},
		{Command{Caller: alice, Path: "/alice/d", Target: "/alice/x"}, chunkfs.KindExist},
		{Command{Caller: alice, Path: "/alice/nope", Target: "/alice/y"}, chunkfs.KindNotExist},
		{Command{Caller: alice, Path: "/alice/d", Target: "/alice/nope/y"}, chunkfs.KindNotExist},
		{Command{Caller: alice, Path: "/alice/d", Target: "relative"}, chunkfs.KindInvalid},
		{Command{Caller: bob, Path: "/alice/d/f", Target: "/alice/y"}, chunkfs.KindPermission},    // no write on the target's directory
		{Command{Caller: bob, Path: "/alice/d", Target: "/home/bobcopy"}, chunkfs.KindPermission}, // unreadable file inside
		{Command{Caller: bob, Path: "/alice/d/f", Target: "/alice/x/y"}, chunkfs.KindNotDir},
	} {
		tc.c.Op = OpSnapshot
		s.fails(&tc.c, tc.want)
	}
	// Bob may snapshot what he can read into a directory he can write.
	s.ok(&Command{Op: OpSnapshot, Caller: bob, Path: "/alice/d/f", Target: "/home/bobf"})
}

func TestCopyChunk(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	h := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 0}).Chunk.Handle
	s.ok(&Command{Op: OpCommitLength, Caller: alice, Path: "/alice/f", Length: 100})
	// Not shared yet: a copy is refused.
	r1 := s.ok(&Command{Op: OpReserveHandle})
	s.fails(&Command{Op: OpCopyChunk, Caller: alice, Path: "/alice/f", Handle: h, NewHandle: r1.Chunk.Handle, Version: 1}, chunkfs.KindStale)
	s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/f", Target: "/alice/s"})
	if c := s.chunkOf("/alice/f", 0); !c.Shared {
		t.Fatal("not shared after the snapshot")
	}
	// The truncation of a shared chunk in its middle waits for a copy.
	s.fails(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetLength, Length: 50}, chunkfs.KindUnavailable)
	nh := s.ok(&Command{Op: OpReserveHandle}).Chunk.Handle
	for _, tc := range []struct {
		c    Command
		want chunkfs.Kind
	}{
		{Command{Caller: alice, Path: "/alice/f", Handle: h, NewHandle: nh, Version: 2}, chunkfs.KindStale},        // version moved
		{Command{Caller: alice, Path: "/alice/f", Handle: h + 100, NewHandle: nh, Version: 1}, chunkfs.KindStale},  // not its chunk
		{Command{Caller: alice, Path: "/alice/f", Handle: h, NewHandle: nh + 1, Version: 1}, chunkfs.KindInvalid},  // not reserved
		{Command{Caller: alice, Path: "/alice/f", Handle: h, NewHandle: h, Version: 1}, chunkfs.KindInvalid},       // in use
		{Command{Caller: bob, Path: "/alice/f", Handle: h, NewHandle: nh, Version: 1}, chunkfs.KindPermission},     // not a writer
		{Command{Caller: alice, Path: "/alice/nope", Handle: h, NewHandle: nh, Version: 1}, chunkfs.KindNotExist},  // no file
		{Command{Caller: alice, Path: "/alice", Handle: h, NewHandle: nh, Version: 1}, chunkfs.KindIsDir},          // a directory
		{Command{Caller: alice, Path: "/alice/f", Handle: 0, NewHandle: nh, Version: 1}, chunkfs.KindStale},        // no chunk named
		{Command{Caller: alice, Path: "/alice/f", Handle: h, NewHandle: 1 << 40, Version: 1}, chunkfs.KindInvalid}, // beyond the counter
	} {
		tc.c.Op = OpCopyChunk
		s.fails(&tc.c, tc.want)
	}
	r := s.ok(&Command{Op: OpCopyChunk, Caller: alice, Path: "/alice/f", Handle: h, NewHandle: nh, Version: 1})
	if r.Chunk.Handle != nh || r.Chunk.Version != 1 || r.Chunk.Index != 0 {
		t.Errorf("copy result %+v", r.Chunk)
	}
	if a, b := s.chunkOf("/alice/f", 0), s.chunkOf("/alice/s", 0); a.Handle != nh || a.Shared || b.Handle != h || b.Shared {
		t.Errorf("after the copy: source %+v, snapshot %+v", a, b)
	}
	// Now the truncation cuts the copy, not the snapshot's chunk.
	if r := s.ok(&Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetLength, Length: 50}); r.Cut == nil || r.Cut.Handle != nh {
		t.Errorf("cut %+v", r.Cut)
	}
	if fi := s.stat(alice, "/alice/s"); fi.Length != 100 {
		t.Errorf("snapshot length %d after the source's truncation", fi.Length)
	}
}

// TestCheckRefCounts has Check catch reference counts that disagree with
// the tree.
func TestCheckRefCounts(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	h := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 0}).Chunk.Handle
	s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/f", Target: "/alice/s"})
	if err := s.ns.Check(); err != nil {
		t.Fatal(err)
	}
	x := &s.ns.handles
	hs := x.holdersOf(h)
	x.setHolders(h, append(slices.Clone(hs), hs[0])) // one holder too many
	if err := s.ns.Check(); err == nil {
		t.Error("Check missed a count above the references")
	}
	x.setHolders(h, hs[:1:1]) // one too few
	if err := s.ns.Check(); err == nil {
		t.Error("Check missed a count below the references")
	}
	x.setHolders(h, hs)
	hs[1].chunks()[0].version++ // holders disagree on the version
	if err := s.ns.Check(); err == nil {
		t.Error("Check missed holders at different versions")
	}
	hs[1].chunks()[0].version--
}

// TestSnapshotRestoreDerivesCounts checks that a checkpoint, which holds
// no counts, restores them from the references.
func TestSnapshotRestoreDerivesCounts(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	h := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 0}).Chunk.Handle
	s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/f", Target: "/alice/s"})
	s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/f", Target: "/alice/t"})
	ns2, err := Restore(bytes.NewReader(snapshot(t, s.ns)))
	if err != nil {
		t.Fatal(err)
	}
	if n := ns2.Refs(h); n != 3 {
		t.Errorf("restored count %d, want 3", n)
	}
	c := Command{Op: OpDelete, Caller: alice, Path: "/alice/f", Time: 1}
	if r := ns2.Apply(&c); r.Err != nil || len(r.Garbage) != 0 || ns2.Refs(h) != 2 {
		t.Errorf("delete after restore: %+v, refs %d", r, ns2.Refs(h))
	}
}
