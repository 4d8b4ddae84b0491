package namespace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// randomCommand makes a plausible command over a small tree of names so
// that operations often collide.
func randomCommand(rng *rand.Rand, now int64) *Command {
	callers := []chunkfs.Caller{chunkfs.Root, alice, bob}
	name := func() string {
		p := ""
		for range 1 + rng.IntN(3) {
			p += fmt.Sprintf("/%c", 'a'+rng.IntN(4))
		}
		return p
	}
	c := &Command{Time: now, Caller: callers[rng.IntN(len(callers))], Path: name(), Mode: uint32(rng.IntN(0o1000))}
	switch rng.IntN(23) {
	case 0:
		c.Op, c.Flags = OpMkdir, FlagParents*uint16(rng.IntN(2))
	case 1:
		c.Op, c.Flags = OpCreate, uint16(rng.IntN(2))*FlagExclusive|uint16(rng.IntN(2))*FlagTruncate
	case 2:
		c.Op, c.Target, c.Flags = OpRename, name(), uint16(rng.IntN(2))*FlagNoReplace
	case 3:
		c.Op, c.Flags = OpDelete, uint16(rng.IntN(2))*FlagRecursive
	case 4:
		c.Op, c.Set = OpSetAttr, uint8(rng.IntN(int(setAll)+1))
		c.UID, c.GID, c.Replication = uint32(1000+rng.IntN(2)), 100, uint32(rng.IntN(4))
		c.Length = rng.Int64N(5 * testChunk)
	case 5, 6:
		c.Op, c.Index, c.Flags = OpAllocChunk, rng.Int64N(5), uint16(rng.IntN(2))*FlagAppend
	case 7:
		c.Op, c.Length = OpCommitLength, rng.Int64N(5*testChunk)
	case 8:
		c.Op, c.Handle = OpBumpVersion, chunkfs.Handle(rng.IntN(40))
	case 9:
		c.Op, c.Handle, c.Version = OpSetVersion, chunkfs.Handle(rng.IntN(40)), chunkfs.Version(rng.Int64N(5))
	case 10:
		c.Op, c.Target, c.Set = OpSetXattr, []string{"user.a", "user.b", "trusted.t", "security.s"}[rng.IntN(4)], uint8(rng.IntN(3))
		c.Value = make([]byte, rng.IntN(20))
	case 11:
		c.Op, c.Target = OpRemoveXattr, []string{"user.a", "user.b", "trusted.t", "security.s"}[rng.IntN(4)]
	case 12, 13, 14, 15:
		// Sources near the root, where files are most often found.
		c.Op, c.Path, c.Target = OpLink, name()[:2], name()
	case 16:
		c.Op, c.Path, c.Target = OpSnapshot, name()[:2], name()
	case 17:
		c.Op = OpReserveHandle
	case 18:
		c.Op, c.Handle, c.NewHandle, c.Version = OpCopyChunk, chunkfs.Handle(rng.IntN(40)), chunkfs.Handle(rng.IntN(40)), chunkfs.Version(1+rng.IntN(2))
	case 19:
		c.Op, c.Flags = OpTrash, uint16(rng.IntN(2))*FlagRecursive
	case 20:
		c.Op, c.Flags, c.Index = OpUndelete, uint16(rng.IntN(2))*FlagParents, rng.Int64N(3)
		if rng.IntN(2) == 0 {
			c.Target = name()
		}
	case 21:
		c.Op, c.Index = OpPurgeTrash, rng.Int64N(2)*rng.Int64N(5)
	case 22:
		c.Op, c.Caller, c.Length = OpTrashPeriod, chunkfs.Root, rng.Int64N(3)*1000
	}
	return c
}

// TestRandomSequencesAreDeterministic applies the same random sequences to
// two namespaces (one through the encoding) and to a namespace restored
// from a snapshot midway; all must agree byte for byte and pass Check.
func TestRandomSequencesAreDeterministic(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		a, b := New(), New()
		init := &Command{Op: OpInit, ChunkSize: testChunk, Replication: 3}
		a.Apply(init)
		b.Apply(init)
		var restored *Namespace
		for i := range 400 {
			c := randomCommand(rng, int64(i+1))
			ra := a.Apply(c)
			rb := b.ApplyEncoded(c.Encode(nil))
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("seed %d op %d %v: results differ: %+v vs %+v", seed, i, c.Op, ra, rb)
			}
			if restored != nil {
				restored.Apply(c)
			}
			if i == 200 {
				var err error
				if restored, err = Restore(bytes.NewReader(snapshot(t, a))); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, ns := range []*Namespace{a, b, restored} {
			if err := ns.Check(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		sa := snapshot(t, a)
		if !bytes.Equal(sa, snapshot(t, b)) || !bytes.Equal(sa, snapshot(t, restored)) {
			t.Fatalf("seed %d: states differ", seed)
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		f.Add(randomCommand(rng, int64(i)).Encode(nil))
	}
	f.Add([]byte{1, 2, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff})
	for _, b := range v1Commands {
		f.Add(b.bytes)
	}
	for _, flag := range allFlags {
		f.Add((&Command{Op: OpRename, Path: "/a", Target: "/b", Flags: flag}).Encode(nil))
	}
	f.Add([]byte{encodingVersion, byte(OpMkdir), 0x80, 0x40, 0, 0}) // an unknown flag bit
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		c2, err := DecodeCommand(c.Encode(nil))
		if err != nil || !reflect.DeepEqual(normal(c), normal(c2)) {
			t.Fatalf("re-encoding changed the command: %+v → %+v (%v)", c, c2, err)
		}
		ns := New()
		ns.Apply(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
		ns.Apply(c)
		if err := ns.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// normal makes empty and nil group lists compare equal.
func normal(c *Command) *Command {
	d := *c
	if len(d.Caller.GIDs) == 0 {
		d.Caller.GIDs = nil
	}
	return &d
}

func FuzzRestore(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	ns := New()
	ns.Apply(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
	for i := range 200 {
		ns.Apply(randomCommand(rng, int64(i)))
	}
	f.Add(snapshot(f, ns))
	f.Add(snapshot(f, New()))
	tr := New()
	for _, c := range []*Command{
		{Op: OpInit, ChunkSize: testChunk, Replication: 3}, {Op: OpTrashPeriod, Length: 1e12},
		{Op: OpCreate, Path: "/a", Mode: 0o644}, {Op: OpAllocChunk, Path: "/a"}, {Op: OpMkdir, Path: "/d", Mode: 0o755},
		{Op: OpCreate, Path: "/d/x", Mode: 0o644}, {Op: OpLink, Path: "/d/x", Target: "/d/y"},
		{Op: OpTrash, Path: "/a"}, {Op: OpTrash, Path: "/d", Flags: FlagRecursive},
	} {
		if r := tr.Apply(c); r.Err != nil {
			f.Fatal(r.Err)
		}
	}
	f.Add(snapshot(f, tr)) // a trash with a file and a tree holding a hard link
	f.Fuzz(func(t *testing.T, b []byte) {
		ns, err := Restore(bytes.NewReader(b))
		if err != nil {
			return
		}
		if err := ns.Check(); err != nil {
			t.Fatalf("accepted an inconsistent snapshot: %v", err)
		}
		// Varints need not be minimal, so compare canonical forms.
		canon := snapshot(t, ns)
		ns2, err := Restore(bytes.NewReader(canon))
		if err != nil || !bytes.Equal(snapshot(t, ns2), canon) {
			t.Fatalf("canonical snapshot does not round-trip: %v", err)
		}
	})
}

// BenchmarkHeapPerFile measures the heap held per file in a namespace of
// 1,000,000 single-chunk files, 1,000 per directory.
func BenchmarkHeapPerFile(b *testing.B) {
	for range b.N {
		ns, perFile := buildMillion(b, 1_000_000)
		b.ReportMetric(perFile, "heapB/file")
		runtime.KeepAlive(ns)
	}
}

func buildMillion(tb testing.TB, files int) (*Namespace, float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ns := New()
	ns.Apply(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
	c := &Command{Mode: 0o644}
	for i := range files {
		if i%1000 == 0 {
			*c = Command{Op: OpMkdir, Path: fmt.Sprintf("/d%04d", i/1000), Mode: 0o755}
			ns.Apply(c)
		}
		p := fmt.Sprintf("/d%04d/file%06d", i/1000, i)
		*c = Command{Op: OpCreate, Path: p, Mode: 0o644, Time: int64(i)}
		if r := ns.Apply(c); r.Err != nil {
			tb.Fatal(r.Err)
		}
		*c = Command{Op: OpAllocChunk, Path: p, Time: int64(i)}
		if r := ns.Apply(c); r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return ns, float64(after.HeapAlloc-before.HeapAlloc) / float64(files)
}

// BenchmarkHeapPerDeadFile builds 1,000,000 single-chunk files, deletes
// them one by one into the trash, and reports the heap the namespace
// takes per dead file (inode, chunk, trash entry and its path), built so
// and restored from its checkpoint (restoredB).
func BenchmarkHeapPerDeadFile(b *testing.B) {
	for range b.N {
		ns, perFile := buildDead(b, 1_000_000)
		b.ReportMetric(perFile, "heapB/deadfile")
		var buf bytes.Buffer
		if err := ns.Snapshot(&buf); err != nil {
			b.Fatal(err)
		}
		ns = nil
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		back, err := Restore(bytes.NewReader(buf.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "restoredB/deadfile")
		runtime.KeepAlive(back)
		runtime.KeepAlive(&buf) // counted before the restore
	}
}

func buildDead(tb testing.TB, files int) (*Namespace, float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ns, _ := buildMillion(tb, files)
	ns.Apply(&Command{Op: OpTrashPeriod, Length: MaxTrashPeriod})
	c := &Command{}
	for i := range files {
		*c = Command{Op: OpTrash, Path: fmt.Sprintf("/d%04d/file%06d", i/1000, i), Time: int64(files + i)}
		if r := ns.Apply(c); r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return ns, float64(after.HeapAlloc-before.HeapAlloc) / float64(files)
}

// TestHeapPerFile holds the namespace to its memory budget (130 bytes per
// single-chunk file; 120 measured) on 200,000 files; skipped in short mode
// and under the race detector, which slows it tenfold.
func TestHeapPerFile(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds 200,000 files")
	}
	ns, perFile := buildMillion(t, 200_000)
	t.Logf("%.0f heap bytes per file", perFile)
	if perFile > 130 {
		t.Errorf("%.0f heap bytes per file, budget 130", perFile)
	}
	runtime.KeepAlive(ns)
}

// BenchmarkSnapshotRestore writes and restores a namespace of 1,000,000
// single-chunk files and reports the snapshot's size per file.
func BenchmarkSnapshotRestore(b *testing.B) {
	ns, _ := buildMillion(b, 1_000_000)
	var buf bytes.Buffer
	b.ResetTimer()
	for range b.N {
		buf.Reset()
		start := time.Now()
		if err := ns.Snapshot(&buf); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "snapshot-s")
		start = time.Now()
		if _, err := Restore(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-s")
	}
	b.ReportMetric(float64(buf.Len())/1e6, "snapshot-B/file")
}

// TestMillionEntryDirectory fills one directory with 1,000,000 files in
// random order and lists it in pages; skipped in short mode and under the
// race detector.
func TestMillionEntryDirectory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds a million-entry directory")
	}
	const n = 1_000_000
	ns := New()
	ns.Apply(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
	ns.Apply(&Command{Op: OpMkdir, Path: "/big", Mode: 0o755})
	perm := rand.New(rand.NewPCG(5, 5)).Perm(n)
	for _, i := range perm {
		if r := ns.Apply(&Command{Op: OpCreate, Path: fmt.Sprintf("/big/%07d", i), Mode: 0o644}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	count, after := 0, ""
	for {
		page, more, err := ns.List(chunkfs.Root, "/big", after, MaxListLimit)
		if err != nil {
			t.Fatal(err)
		}
		for _, fi := range page {
			if want := fmt.Sprintf("%07d", count); fi.FileName != want {
				t.Fatalf("entry %d is %s, want %s", count, fi.FileName, want)
			}
			count++
		}
		if !more {
			break
		}
		after = page[len(page)-1].FileName
	}
	if count != n {
		t.Fatalf("listed %d entries, want %d", count, n)
	}
	if err := ns.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestRandomLinksAgainstModel runs random creates, links, renames,
// exchanges, unlinks and recursive deletes over a few names and checks
// the namespace against a model after every step: which inode each name
// has, each inode's link count, and that an inode's chunks are freed
// exactly when its last name goes.
func TestRandomLinksAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		ns := New()
		ns.Apply(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
		model := map[string]uint64{} // file name → inode number
		chunk := map[uint64]chunkfs.Handle{}
		name := func() string { return fmt.Sprintf("/d%d/f%d", rng.IntN(2), rng.IntN(4)) }
		for i := range 300 {
			for _, d := range []string{"/d0", "/d1"} {
				ns.Apply(&Command{Op: OpMkdir, Path: d, Flags: FlagParents, Mode: 0o755})
			}
			c := &Command{Time: int64(i + 1), Path: name(), Target: name(), Mode: 0o644}
			c.Op = []Op{OpCreate, OpLink, OpLink, OpRename, OpRename, OpDelete, OpDelete}[rng.IntN(7)]
			if c.Op == OpCreate {
				c.Target = "" // a file, not a symbolic link
			}
			if c.Op == OpRename && rng.IntN(3) == 0 {
				c.Flags = FlagExchange
			}
			if c.Op == OpDelete && rng.IntN(8) == 0 {
				c.Path, c.Flags = fmt.Sprintf("/d%d", rng.IntN(2)), FlagRecursive
			}
			r := ns.Apply(c)
			freed := map[chunkfs.Handle]bool{}
			for _, h := range r.Garbage {
				freed[h] = true
			}
			applyModel(model, c, r)
			if c.Op == OpCreate && r.Created {
				ar := ns.Apply(&Command{Op: OpAllocChunk, Path: c.Path})
				if ar.Err != nil {
					t.Fatal(ar.Err)
				}
				chunk[r.Info.Inode] = ar.Chunk.Handle
			}
			if err := ns.Check(); err != nil {
				t.Fatalf("seed %d step %d %v %s → %s: %v", seed, i, c.Op, c.Path, c.Target, err)
			}
			names := map[uint64]uint32{}
			for p, ino := range model {
				names[ino]++
				fi, err := ns.Stat(chunkfs.Root, p)
				if err != nil || fi.Inode != ino {
					t.Fatalf("seed %d step %d: %s is %+v %v, model says inode %d", seed, i, p, fi, err, ino)
				}
			}
			for p, ino := range model {
				if fi, _ := ns.Stat(chunkfs.Root, p); fi.Nlink != names[ino] {
					t.Fatalf("seed %d step %d: %s has nlink %d, model %d", seed, i, p, fi.Nlink, names[ino])
				}
			}
			for ino, h := range chunk {
				_, live := ns.ChunkVersion(h)
				if live != (names[ino] > 0) || freed[h] == live {
					t.Fatalf("seed %d step %d: inode %d (%d names): chunk live %v, freed now %v", seed, i, ino, names[ino], live, freed[h])
				}
				if !live {
					delete(chunk, ino)
				}
			}
		}
	}
}

// applyModel applies c's effect on the model of file names, given that
// the namespace answered r.
func applyModel(model map[string]uint64, c *Command, r Result) {
	if r.Err != nil {
		return
	}
	switch {
	case c.Op == OpCreate:
		model[c.Path] = r.Info.Inode
	case c.Op == OpLink:
		model[c.Target] = model[c.Path]
	case c.Op == OpRename && c.Flags&FlagExchange != 0:
		model[c.Path], model[c.Target] = model[c.Target], model[c.Path]
	case c.Op == OpRename && model[c.Path] != model[c.Target]:
		model[c.Target] = model[c.Path]
		delete(model, c.Path)
	case c.Op == OpDelete:
		for p := range model {
			if isUnder(p, c.Path) {
				delete(model, p)
			}
		}
	}
}

// TestCommandNumbersKeepTheirSlot: each op's number (a chunk index, a
// chunk size, a horizon, a version, a device number, a length) is encoded
// in the one slot every log written so far has it in, and decodes into the
// field the op names.
func TestCommandNumbersKeepTheirSlot(t *testing.T) {
	for _, c := range []Command{
		{Op: OpAllocChunk, Path: "/f", Index: 3},
		{Op: OpInit, ChunkSize: 3},
		{Op: OpLeaseHorizon, Horizon: 3},
		{Op: OpSetVersion, Version: 3},
		{Op: OpCreate, Path: "/f", Rdev: 3},
		{Op: OpCommitLength, Path: "/f", Length: 3},
		{Op: OpUndelete, Path: "/f", Index: 3},
		{Op: OpPurgeTrash, Path: "/f", Index: 3},
		{Op: OpTrashPeriod, Path: "/f", Length: 3},
	} {
		// Encoding 1 (in logs written before encoding 2) and encoding 2
		// lay out a command without flags alike but for the version byte.
		for _, version := range []byte{encodingV1, encodingVersion} {
			want := []byte{version, byte(c.Op), 0, 0}
			if c.Path != "" {
				want = binary.AppendUvarint(want, hasPath|hasLength)
				want = append(want, 2, '/', 'f')
			} else {
				want = binary.AppendUvarint(want, hasLength)
			}
			want = binary.AppendVarint(want, 3)
			if b := c.Encode(nil); version == encodingVersion && !bytes.Equal(b, want) {
				t.Errorf("%v encodes as %x, want %x", c.Op, b, want)
			}
			got, err := DecodeCommand(want)
			if err != nil || !reflect.DeepEqual(normal(got), normal(&c)) {
				t.Errorf("%v decodes from %x as %+v (%v), want %+v", c.Op, want, got, err, c)
			}
		}
	}
	for _, version := range []byte{encodingV1, encodingVersion} {
		for _, b := range [][]byte{
			binary.AppendVarint(binary.AppendUvarint([]byte{version, byte(OpSetVersion), 0, 0}, hasLength), -1),
			binary.AppendVarint(binary.AppendUvarint([]byte{version, byte(OpCreate), 0, 0}, hasLength), 1<<32),
		} {
			if c, err := DecodeCommand(b); err == nil {
				t.Errorf("%x decodes as %+v; want an error", b, c)
			}
		}
	}
}
