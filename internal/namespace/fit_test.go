package namespace

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestOrderedListsFitTheirEntries restores directories of 100 and 1,000
// entries and snapshots the first: lists built in order take a slot an
// entry, in blocks of half the most a block holds (each block took 256
// slots, whatever the directory held).
func TestOrderedListsFitTheirEntries(t *testing.T) {
	s := newTNS(t)
	for _, n := range []int{100, 1000} {
		s.ok(&Command{Op: OpMkdir, Path: fmt.Sprintf("/d%d", n), Mode: 0o755})
		for i := range n {
			s.ok(&Command{Op: OpCreate, Path: fmt.Sprintf("/d%d/f%04d", n, i), Mode: 0o644})
		}
	}
	s.ok(&Command{Op: OpSnapshot, Path: "/d100", Target: "/snap"})
	restored, err := Restore(bytes.NewReader(snapshot(t, s.ns)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns   *Namespace
		name string
		want int
	}{{s.ns, "snap", 100}, {restored, "d100", 100}, {restored, "d1000", 1000}, {restored, "snap", 100}} {
		kids := tc.ns.root.ext().kids.get(tc.name).ext().kids
		slots := 0
		for _, blk := range kids.blocks {
			slots += cap(blk.ents)
		}
		if kids.Len() != tc.want || slots != tc.want {
			t.Errorf("/%s: %d entries in %d slots, want %d in as many", tc.name, kids.Len(), slots, tc.want)
		}
	}
}

// TestChunkListsFitTheirChunks grows files chunk by chunk, restores and
// snapshots them: a list of up to exactRefs chunks takes a slot a chunk,
// written, restored or copied (append left 4 slots for 3 chunks, 8 for
// 5), and a longer one listCap's. Under the race detector, a list with
// less room than its listCap straddles other allocations and fails the
// pointer checks.
func TestChunkListsFitTheirChunks(t *testing.T) {
	s := newTNS(t)
	sizes := []int{1, 2, 3, 5, exactRefs, exactRefs + 3, 100}
	for _, n := range sizes {
		p := fmt.Sprintf("/f%d", n)
		s.ok(&Command{Op: OpCreate, Path: p, Mode: 0o644})
		for i := range n {
			s.ok(&Command{Op: OpAllocChunk, Path: p, Index: int64(i)})
		}
	}
	s.ok(&Command{Op: OpMkdir, Path: "/d", Mode: 0o755})
	for _, n := range sizes {
		s.ok(&Command{Op: OpSnapshot, Path: fmt.Sprintf("/f%d", n), Target: fmt.Sprintf("/d/f%d", n)})
	}
	restored, err := Restore(bytes.NewReader(snapshot(t, s.ns)))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		name := fmt.Sprintf("f%d", n)
		live, back := s.ns.root.ext().kids.get(name).chunks(), restored.root.ext().kids.get(name).chunks()
		copied := s.ns.root.ext().kids.get("d").ext().kids.get(name).chunks()
		for _, l := range [][]chunkRef{live, back, copied} {
			if len(l) != n || cap(l) != listCap(n) {
				t.Errorf("%s: %d chunks in %d slots (live %d, restored %d, copied %d), want %d", name, len(l), cap(l), len(live), len(back), len(copied), listCap(n))
			}
		}
	}
}

// TestEntryNamesOwnTheirBytes creates and renames files by long paths
// and checks that no entry's name shares the bytes of the command's path
// (it kept the whole path alive as long as the entry).
func TestEntryNamesOwnTheirBytes(t *testing.T) {
	s := newTNS(t)
	dir := "/home/" + strings.Repeat("d", 200)
	s.ok(&Command{Op: OpMkdir, Path: dir, Mode: 0o755})
	create := &Command{Op: OpCreate, Path: dir + "/f", Mode: 0o644}
	rename := &Command{Op: OpRename, Path: dir + "/f", Target: dir + "/g"}
	for _, c := range []*Command{create, rename} {
		s.now += 1000
		c.Time = s.now
		if r := s.ns.Apply(c); r.Err != nil { // not through the encoding: the path's bytes are c's own
			t.Fatal(r.Err)
		}
		p := c.Path
		if c.Op == OpRename {
			p = c.Target
		}
		d := s.ns.root.ext().kids.get("home").ext().kids.get(strings.Repeat("d", 200))
		d.ext().kids.all(func(name string, _ *inode) bool {
			start := uintptr(unsafe.Pointer(unsafe.StringData(p)))
			if at := uintptr(unsafe.Pointer(unsafe.StringData(name))); at >= start && at < start+uintptr(len(p)) {
				t.Errorf("%s: entry %q shares the bytes of the command's path", c.Op, name)
			}
			return true
		})
	}
}

// TestInodeSize pins the inode at 64 bytes, a class of Go's allocator
// (at 65 it takes 80): the master holds one a file, millions of them.
func TestInodeSize(t *testing.T) {
	if n := unsafe.Sizeof(inode{}); n != 64 {
		t.Errorf("inode is %d bytes, want 64", n)
	}
}

// TestExtSize pins the ext of directories, links, devices and files with
// attributes at 96 bytes, a class of Go's allocator (at 97 it takes 112).
func TestExtSize(t *testing.T) {
	if n := unsafe.Sizeof(ext{}); n != 96 {
		t.Errorf("ext is %d bytes, want 96", n)
	}
}

// TestListCap checks the room of a chunk list: its length up to
// exactRefs, above it at most a quarter more, never less, and never
// shrinking as the list grows.
func TestListCap(t *testing.T) {
	prev := 0
	for k := 0; k <= 1<<20; k += 1 + k/64 {
		c := listCap(k)
		switch {
		case k <= exactRefs && c != k, c < k, c > k+k/4, c < prev:
			t.Fatalf("listCap(%d) = %d (listCap of the one before %d)", k, c, prev)
		}
		prev = c
	}
}

// TestTrashEntrySize pins a trash entry, kept by value, at 56 bytes: a
// dead file's, beside its inode and its path's bytes.
func TestTrashEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(trashEntry{}); n != 56 {
		t.Errorf("trash entry is %d bytes, want 56", n)
	}
}

// TestInsertedListsKeepLittleRoom creates directories of 100 and 1,000
// entries in random order: their blocks keep at most an eighth of room
// spare, beside a slot each (append doubled them: 128 slots for 100).
func TestInsertedListsKeepLittleRoom(t *testing.T) {
	s := newTNS(t)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{100, 1000} {
		s.ok(&Command{Op: OpMkdir, Path: fmt.Sprintf("/d%d", n), Mode: 0o755})
		for _, i := range rng.Perm(n) {
			s.ok(&Command{Op: OpCreate, Path: fmt.Sprintf("/d%d/f%04d", n, i), Mode: 0o644})
		}
		kids := s.ns.root.ext().kids.get(fmt.Sprintf("d%d", n)).ext().kids
		slots := 0
		for _, blk := range kids.blocks {
			slots += cap(blk.ents) - 1 // a block may have grown by one to split
		}
		if kids.Len() != n || slots > n+n/8 {
			t.Errorf("/d%d: %d entries in %d slots", n, kids.Len(), slots)
		}
	}
}

// TestRemovedEntriesGiveBackRoom fills a directory of 1,000 entries and
// removes 300 of them at random: the blocks keep room for at most a
// quarter more entries (and four) and no more dead name bytes than live.
func TestRemovedEntriesGiveBackRoom(t *testing.T) {
	s := newTNS(t)
	rng := rand.New(rand.NewPCG(2, 2))
	s.ok(&Command{Op: OpMkdir, Path: "/d", Mode: 0o755})
	for i := range 1000 {
		s.ok(&Command{Op: OpCreate, Path: fmt.Sprintf("/d/f%04d", i), Mode: 0o644})
	}
	for _, i := range rng.Perm(1000)[:300] {
		s.ok(&Command{Op: OpDelete, Path: fmt.Sprintf("/d/f%04d", i)})
	}
	kids := s.ns.root.ext().kids.get("d").ext().kids
	for i, blk := range kids.blocks {
		if n := len(blk.ents); cap(blk.ents) > n+n/4+4 || blk.dead > len(blk.names)/2 {
			t.Errorf("block %d: %d entries in %d slots, %d of %d name bytes dead", i, n, cap(blk.ents), blk.dead, len(blk.names))
		}
	}
}

// TestChildrenMatchesMap inserts and removes names of 1 to 255 bytes at
// random in a children list and a map, and checks they hold the same in
// order; that every name handed out earlier still reads as it did (a
// name is a view of its block's bytes, never written over); and that no
// block keeps more dead name bytes than live ones.
func TestChildrenMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var c children
	want := map[string]*inode{}
	var held []string // names handed out, with their bytes as they were
	var copies []string
	file := &inode{}
	for step := range 20000 {
		name := strings.Repeat(string(rune('a'+rng.IntN(26))), 1+rng.IntN(3)) + fmt.Sprint(rng.IntN(200))
		if rng.IntN(40) == 0 {
			name += strings.Repeat("z", 200)
		}
		if want[name] == nil {
			c.insert(name, file)
			want[name] = file
		} else {
			if !c.remove(name) {
				t.Fatalf("step %d: remove(%q) found nothing", step, name)
			}
			delete(want, name)
		}
		if step%97 == 0 && c.Len() > 0 {
			c.all(func(n string, _ *inode) bool {
				held, copies = append(held, n), append(copies, strings.Clone(n))
				return false
			})
		}
	}
	var got []string
	c.all(func(n string, k *inode) bool {
		if want[n] != k {
			t.Fatalf("entry %q is not in the map", n)
		}
		got = append(got, n)
		return true
	})
	if !slices.IsSorted(got) || len(got) != len(want) || c.Len() != len(want) {
		t.Fatalf("list holds %d (sorted %v, counts %d), map %d", len(got), slices.IsSorted(got), c.Len(), len(want))
	}
	for i := range held {
		if held[i] != copies[i] {
			t.Fatalf("a name handed out as %q now reads %q", copies[i], held[i])
		}
	}
	for i, b := range c.blocks {
		if b.dead > len(b.names)/2 {
			t.Errorf("block %d: %d of %d name bytes dead", i, b.dead, len(b.names))
		}
	}
}
