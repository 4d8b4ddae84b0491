package namespace

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
)

const testPeriod = 1_000_000 // ns; tns.apply advances 1000 a command

// newTrashTNS is newTNS with a trash period of testPeriod and alice's file
// /alice/f of two chunks.
func newTrashTNS(t *testing.T) *tns {
	s := newTNS(t)
	s.ok(&Command{Op: OpTrashPeriod, Length: testPeriod})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	for i := range int64(2) {
		s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: i})
	}
	s.ok(&Command{Op: OpCommitLength, Caller: alice, Path: "/alice/f", Length: testChunk + 5})
	return s
}

func TestTrashAndUndelete(t *testing.T) {
	s := newTrashTNS(t)
	r := s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/f"})
	if r.Trashed == 0 || r.Garbage != nil {
		t.Fatalf("trash: entry %d, garbage %v; want an entry and no garbage", r.Trashed, r.Garbage)
	}
	if _, err := s.ns.Stat(alice, "/alice/f"); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("stat of a trashed file: %v", err)
	}
	if c, d := s.ns.Counts(), s.ns.DeadCounts(); c.Chunks != 0 || d != (Counts{Files: 1, Chunks: 2, Bytes: testChunk + 5}) {
		t.Fatalf("live %+v, dead %+v", c, d)
	}
	page, more := s.ns.Trash(alice, 0, 10)
	if len(page) != 1 || more || page[0].Path != "/alice/f" || page[0].UID != alice.UID || page[0].Expires != page[0].Time+testPeriod {
		t.Fatalf("trash listing %+v", page)
	}
	if page, _ := s.ns.Trash(bob, 0, 10); len(page) != 0 {
		t.Fatalf("bob sees alice's trash: %+v", page)
	}
	s.ok(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f"})
	if fi := s.stat(alice, "/alice/f"); fi.Length != testChunk+5 {
		t.Fatalf("undeleted file has length %d", fi.Length)
	}
	if _, c, _ := s.ns.Chunks(alice, "/alice/f", 0, 10, false); len(c) != 2 {
		t.Fatalf("undeleted file has %d chunks", len(c))
	}
	if d := s.ns.DeadCounts(); d != (Counts{}) {
		t.Fatalf("dead counts after undelete: %+v", d)
	}
}

func TestTrashPurgeFreesChunksOnlyAfterThePeriod(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/f"})
	if r := s.ok(&Command{Op: OpPurgeTrash}); r.Garbage != nil {
		t.Fatalf("purge within the period freed %v", r.Garbage)
	}
	if s.ns.TrashDue(s.now) || !s.ns.TrashDue(s.now+testPeriod) {
		t.Fatal("TrashDue wrong about the period")
	}
	s.now += testPeriod
	r := s.ok(&Command{Op: OpPurgeTrash})
	if len(r.Garbage) != 2 {
		t.Fatalf("purge after the period freed %v, want 2 chunks", r.Garbage)
	}
	if page, _ := s.ns.Trash(chunkfs.Root, 0, 10); len(page) != 0 {
		t.Fatalf("trash after purge: %+v", page)
	}
	s.fails(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f"}, chunkfs.KindNotExist)
	if d := s.ns.DeadCounts(); d != (Counts{}) {
		t.Fatalf("dead counts after purge: %+v", d)
	}
}

func TestTrashTreeAndHardLinks(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/d", Mode: 0o755})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/d/in", Mode: 0o644})
	s.ok(&Command{Op: OpLink, Caller: alice, Path: "/alice/d/in", Target: "/alice/d/in2"})
	s.ok(&Command{Op: OpLink, Caller: alice, Path: "/alice/f", Target: "/alice/d/out"})
	// A name that is not the last goes at once: the file lives on.
	if r := s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/d/in2"}); r.Trashed != 0 {
		t.Fatal("a hard link's other name went to the trash")
	}
	s.ok(&Command{Op: OpLink, Caller: alice, Path: "/alice/d/in", Target: "/alice/d/in2"})
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/d", Flags: FlagRecursive})
	// f keeps its outside name, and it is live.
	if fi := s.stat(alice, "/alice/f"); fi.Nlink != 1 {
		t.Fatalf("/alice/f has %d names after its other name's tree was deleted", fi.Nlink)
	}
	if d := s.ns.DeadCounts(); d.Files != 1 || d.Dirs != 1 {
		t.Fatalf("dead counts %+v, want 1 file (two names) and 1 directory", d)
	}
	s.ok(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/d", Target: "/alice/e"})
	if fi := s.stat(alice, "/alice/e/in2"); fi.Nlink != 2 {
		t.Fatalf("undeleted hard link has %d names", fi.Nlink)
	}
	if _, err := s.ns.Stat(alice, "/alice/e/out"); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("the outside file's name came back in the tree: %v", err)
	}
}

func TestTrashRefusalsChangeNothing(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/f"})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o644})
	s.fails(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f"}, chunkfs.KindExist)
	s.fails(&Command{Op: OpUndelete, Caller: bob, Path: "/alice/f", Target: "/home/f"}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f", Target: "/home/x/y"}, chunkfs.KindNotExist)
	s.fails(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f", Target: "/g"}, chunkfs.KindPermission) // root's directory
	s.fails(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f", Target: "/"}, chunkfs.KindExist)
	s.fails(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f", Target: "/alice/../x"}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpUndelete, Caller: alice, Path: "/nowhere"}, chunkfs.KindNotExist)
	s.fails(&Command{Op: OpUndelete, Caller: alice, Path: "relative"}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpUndelete, Caller: alice, Index: 99}, chunkfs.KindNotExist)
	s.fails(&Command{Op: OpPurgeTrash, Caller: bob, Index: 1}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpTrashPeriod, Caller: alice, Length: 5}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpTrashPeriod, Length: -1}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpTrashPeriod, Length: MaxTrashPeriod + 1}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpTrash, Caller: bob, Path: "/alice/f"}, chunkfs.KindPermission)
	s.fails(&Command{Op: OpTrash, Path: "/"}, chunkfs.KindInvalid)
	// With -p the missing parents are made; to another name it comes back.
	s.ok(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f", Target: "/alice/new/dir/f", Flags: FlagParents})
	if fi := s.stat(alice, "/alice/new/dir/f"); fi.Length != testChunk+5 {
		t.Fatalf("undeleted to a new name: length %d", fi.Length)
	}
}

func TestTrashSuperuserAndOwner(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/home/a", Mode: 0o644})
	s.ok(&Command{Op: OpCreate, Caller: bob, Path: "/home/b", Mode: 0o644})
	s.ok(&Command{Op: OpTrash, Caller: chunkfs.Root, Path: "/home/a"})
	s.ok(&Command{Op: OpTrash, Caller: bob, Path: "/home/b"})
	// alice owns what root deleted, so she sees it; root sees everything.
	if page, _ := s.ns.Trash(alice, 0, 10); len(page) != 1 || page[0].Path != "/home/a" {
		t.Fatalf("alice's view: %+v", page)
	}
	if page, more := s.ns.Trash(chunkfs.Root, 0, 1); len(page) != 1 || !more {
		t.Fatalf("root's first page: %+v more %v", page, more)
	}
	if page, more := s.ns.Trash(chunkfs.Root, 1, 1); len(page) != 1 || more || page[0].Path != "/home/b" {
		t.Fatalf("root's second page: %+v more %v", page, more)
	}
	s.ok(&Command{Op: OpUndelete, Caller: chunkfs.Root, Path: "/home/b"})
	s.ok(&Command{Op: OpPurgeTrash, Caller: alice, Index: 1})
}

func TestRenameOverAFileTrashesIt(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/g", Mode: 0o644})
	r := s.ok(&Command{Op: OpRename, Caller: alice, Path: "/alice/g", Target: "/alice/f"})
	if r.Trashed == 0 || r.Garbage != nil {
		t.Fatalf("rename over a file: entry %d, garbage %v", r.Trashed, r.Garbage)
	}
	s.ok(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/f", Target: "/alice/f.old"})
	if fi := s.stat(alice, "/alice/f.old"); fi.Length != testChunk+5 {
		t.Fatalf("replaced file came back with length %d", fi.Length)
	}
}

func TestTrashPeriodZeroDeletesAtOnce(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/f"})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/g", Mode: 0o644})
	s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/g"})
	s.ok(&Command{Op: OpTrashPeriod})
	if r := s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/g"}); len(r.Garbage) != 1 || r.Trashed != 0 {
		t.Fatalf("delete with period 0: %+v", r)
	}
	// What was in the trash is due at once.
	if r := s.ok(&Command{Op: OpPurgeTrash}); len(r.Garbage) != 2 {
		t.Fatalf("purge with period 0 freed %v", r.Garbage)
	}
}

func TestTrashCheckpointKeepsEntriesAndTimes(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/d", Mode: 0o755})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/d/x", Mode: 0o644})
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/d", Flags: FlagRecursive})
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/f"})
	ns2, err := Restore(bytes.NewReader(snapshot(t, s.ns)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.ns.Trash(chunkfs.Root, 0, 10)
	b, _ := ns2.Trash(chunkfs.Root, 0, 10)
	if !slices.EqualFunc(a, b, func(x, y TrashEntry) bool { return x == y }) || len(a) != 2 {
		t.Fatalf("trash after restore %+v, before %+v", b, a)
	}
	if ns2.TrashPeriod() != testPeriod || ns2.DeadCounts() != s.ns.DeadCounts() || ns2.Counts() != s.ns.Counts() {
		t.Fatal("period or counts differ after restore")
	}
}

func TestRestoreRejectsBadTrash(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/f"})
	// Two entries with one ID, and an entry naming an inode the tree has.
	dup := s.ns.trash.entries[0]
	dup.time = 1
	paths := s.ns.trash.paths
	s.ns.trash.add(dup, "/x")
	if _, err := Restore(bytes.NewReader(snapshot(t, s.ns))); err == nil {
		t.Fatal("restore took a trash with a repeated entry")
	}
	s.ns.trash.entries, s.ns.trash.paths = s.ns.trash.entries[:1], paths
	e := &s.ns.trash.entries[0]
	file := e.node
	e.node = s.ns.lookupForTest("/alice")
	if err := s.ns.Check(); err == nil {
		t.Fatal("Check took a trash entry naming a live directory")
	}
	e.node = file
}

// TestTrashOfASnapshotRestores: chunks a snapshot shares with a live
// file stay live when the snapshot is trashed, and a checkpoint of that
// state restores (it failed its check, so a master could not restart);
// the trashed snapshot's chunks count as dead once the source is gone
// too, whichever the entries, before and after a restore.
func TestTrashOfASnapshotRestores(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/f", Target: "/alice/s"})
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/s"})
	restoreSame := func(what string) {
		t.Helper()
		if err := s.ns.Check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		ns2, err := Restore(bytes.NewReader(snapshot(t, s.ns)))
		if err != nil {
			t.Fatalf("%s: restore: %v", what, err)
		}
		if ns2.Counts() != s.ns.Counts() || ns2.DeadCounts() != s.ns.DeadCounts() {
			t.Fatalf("%s: counts %+v dead %+v after restore, %+v %+v before", what, ns2.Counts(), ns2.DeadCounts(), s.ns.Counts(), s.ns.DeadCounts())
		}
	}
	if c, d := s.ns.Counts(), s.ns.DeadCounts(); c.Chunks != 2 || d.Chunks != 0 || d.Files != 1 {
		t.Fatalf("live %+v, dead %+v; want the shared chunks live", c, d)
	}
	restoreSame("snapshot trashed")
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/f"})
	restoreSame("source trashed too")
	s.now += testPeriod
	if r := s.ok(&Command{Op: OpPurgeTrash}); len(r.Garbage) != 2 {
		t.Fatalf("purge freed %v, want the 2 chunks", r.Garbage)
	}
	if c, d := s.ns.Counts(), s.ns.DeadCounts(); c != (Counts{Dirs: c.Dirs}) || d != (Counts{}) {
		t.Fatalf("after the purge: live %+v, dead %+v", c, d)
	}
	restoreSame("purged")
}

// TestChunkFileSaysDead: a chunk is dead (its repair waits behind live
// files') only when files in the trash alone hold it — not while a live
// file shares it — before and after a restore, and no longer once
// undeleted.
func TestChunkFileSaysDead(t *testing.T) {
	s := newTrashTNS(t)
	s.ok(&Command{Op: OpMkdir, Caller: alice, Path: "/alice/d", Mode: 0o755})
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/d/x", Mode: 0o644})
	s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/d/x", Index: 0})
	handle := func(p string) chunkfs.Handle {
		t.Helper()
		_, c, err := s.ns.Chunks(alice, p, 0, 1, false)
		if err != nil || len(c) != 1 {
			t.Fatalf("chunks of %s: %v %v", p, c, err)
		}
		return c[0].Handle
	}
	hx, hf := handle("/alice/d/x"), handle("/alice/f")
	s.ok(&Command{Op: OpSnapshot, Caller: alice, Path: "/alice/f", Target: "/alice/s"})
	dead := func(ns *Namespace, h chunkfs.Handle, want bool, when string) {
		t.Helper()
		if _, _, _, got, ok := ns.ChunkFile(h); !ok || got != want {
			t.Fatalf("%s: chunk %d dead %v (exists %v), want %v", when, h, got, ok, want)
		}
	}
	dead(s.ns, hx, false, "live")
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/d", Flags: FlagRecursive})
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/s"})
	dead(s.ns, hx, true, "its tree trashed")
	dead(s.ns, hf, false, "shared with a live file")
	ns2, err := Restore(bytes.NewReader(snapshot(t, s.ns)))
	if err != nil {
		t.Fatal(err)
	}
	dead(ns2, hx, true, "after a restore")
	dead(ns2, hf, false, "shared, after a restore")
	s.ok(&Command{Op: OpTrash, Caller: alice, Path: "/alice/f"})
	dead(s.ns, hf, true, "both holders trashed")
	s.ok(&Command{Op: OpUndelete, Caller: alice, Path: "/alice/d"})
	dead(s.ns, hx, false, "undeleted")
	if err := s.ns.Check(); err != nil {
		t.Fatal(err)
	}
	d := s.ns.lookupForTest("/alice/d")
	d.setDead(true)
	if err := s.ns.Check(); err == nil {
		t.Fatal("Check took a live directory marked dead")
	}
	d.setDead(false)
}

// TestTrashPathsCompacted deletes 60 files into the trash and takes them
// out again, undeleted and purged by ID from the middle and purged when
// due from the front: each listing names the paths a model keeps, the
// paths' bytes are at most twice the live ones (Check), and a checkpoint
// frozen before the removals, written after them, holds the trash of its
// freeze.
func TestTrashPathsCompacted(t *testing.T) {
	s := newTrashTNS(t)
	var model []string // paths in the trash, in deletion order
	for i := range 60 {
		p := fmt.Sprintf("/home/%s-%d", strings.Repeat("x", i%7+1), i)
		s.ok(&Command{Op: OpCreate, Path: p, Mode: 0o644})
		s.ok(&Command{Op: OpTrash, Path: p})
		model = append(model, p)
	}
	want := snapshot(t, s.ns)
	frozen := s.ns.Freeze()
	same := func(when string) {
		t.Helper()
		page, _ := s.ns.Trash(chunkfs.Root, 0, 0)
		got := make([]string, len(page))
		for i, e := range page {
			got[i] = e.Path
		}
		if !slices.Equal(got, model) {
			t.Fatalf("%s: trash lists %q, want %q", when, got, model)
		}
		if err := s.ns.Check(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	same("after the deletes")
	for i := 0; i < 40; i++ {
		page, _ := s.ns.Trash(chunkfs.Root, 0, 0)
		e := page[len(page)/2]
		if i%2 == 0 {
			s.ok(&Command{Op: OpUndelete, Path: e.Path, Index: int64(e.ID)})
		} else {
			s.ok(&Command{Op: OpPurgeTrash, Index: int64(e.ID)})
		}
		model = slices.Delete(model, len(model)/2, len(model)/2+1)
		same(fmt.Sprintf("after removal %d", i))
	}
	s.now += testPeriod
	s.ok(&Command{Op: OpCreate, Path: "/home/late", Mode: 0o644})
	s.ok(&Command{Op: OpTrash, Path: "/home/late"})
	model = append(model[:0], "/home/late") // the rest is due
	s.ok(&Command{Op: OpPurgeTrash})
	same("after the due purge")
	var buf bytes.Buffer
	if err := frozen.Write(&buf); err != nil || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("the checkpoint frozen before the removals differs from the state then (%v)", err)
	}
}
