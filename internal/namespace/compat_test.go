package namespace

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// buildRich makes a namespace of most kinds of state: files of 0 to 19
// chunks (lists above exactRefs), extended attributes on files with
// chunks, hard links, symbolic links, a snapshot sharing chunks, and a
// trash of files and a tree.
func buildRich(t *testing.T) *Namespace {
	ns := New()
	ap := func(c *Command) {
		t.Helper()
		if r := ns.Apply(c); r.Err != nil {
			t.Fatalf("%v %s: %v", c.Op, c.Path, r.Err)
		}
	}
	ap(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
	ap(&Command{Op: OpTrashPeriod, Length: MaxTrashPeriod})
	now := int64(1e9)
	for d := range 5 {
		ap(&Command{Op: OpMkdir, Path: fmt.Sprintf("/d%d", d), Mode: 0o755, Time: now})
		for f := range 40 {
			p := fmt.Sprintf("/d%d/f%d", d, f)
			now += 1000
			ap(&Command{Op: OpCreate, Path: p, Mode: 0o644, Time: now})
			for i := range int64(f % 20) {
				ap(&Command{Op: OpAllocChunk, Path: p, Index: i, Time: now})
			}
			if f%5 == 0 {
				ap(&Command{Op: OpSetXattr, Path: p, Target: "user.x", Value: []byte("v"), Time: now})
			}
			if f%7 == 0 {
				ap(&Command{Op: OpLink, Path: p, Target: p + "l", Time: now})
			}
		}
		ap(&Command{Op: OpCreate, Path: fmt.Sprintf("/d%d/s", d), Target: "/d0/f1", Time: now})
	}
	ap(&Command{Op: OpSnapshot, Path: "/d1", Target: "/snap", Time: now})
	for f := 0; f < 40; f += 3 {
		ap(&Command{Op: OpTrash, Path: fmt.Sprintf("/d2/f%d", f), Time: now})
	}
	ap(&Command{Op: OpTrash, Path: "/d3", Flags: FlagRecursive, Time: now})
	return ns
}

// TestCheckpointOfTheOldLayout restores a checkpoint that the code before
// the 64-byte inode and the trash's one array of paths wrote of
// buildRich's namespace (testdata/checkpoint-ff58309.bin, commit
// ff58309, format 7): it checks, writes back the same bytes in that
// format, and the same commands now give the same bytes.
func TestCheckpointOfTheOldLayout(t *testing.T) {
	old, err := os.ReadFile("testdata/checkpoint-ff58309.bin")
	if err != nil {
		t.Fatal(err)
	}
	back, err := Restore(bytes.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Check(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotIn(t, back, snapshotCluster), old) {
		t.Error("the restored checkpoint writes other bytes")
	}
	if !bytes.Equal(snapshotIn(t, buildRich(t), snapshotCluster), old) {
		t.Error("the same commands give another checkpoint than the old layout's")
	}
}

// snapshotIn is ns's checkpoint in format version.
func snapshotIn(t *testing.T, ns *Namespace, version byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := ns.snapshotAs(&b, version); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
