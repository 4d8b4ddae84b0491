package namespace

import (
	"bytes"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// TestClusterIDSetOnceAndCheckpointed: the cluster ID is set once (again
// with the same ID changes nothing, another is refused, a bad one too),
// survives a checkpoint and a frozen one, and a format 6 checkpoint
// restores with none.
func TestClusterIDSetOnceAndCheckpointed(t *testing.T) {
	ns := New()
	if r := ns.Apply(&Command{Op: OpClusterID, Target: "bad id"}); chunkfs.KindOf(r.Err) != chunkfs.KindInvalid {
		t.Fatalf("a cluster ID with a space: %v", r.Err)
	}
	f := ns.Freeze()
	if r := ns.Apply(&Command{Op: OpClusterID, Target: "CID-1"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := ns.Apply(&Command{Op: OpClusterID, Target: "CID-1"}); r.Err != nil {
		t.Fatalf("the same ID again: %v", r.Err)
	}
	if r := ns.Apply(&Command{Op: OpClusterID, Target: "CID-2"}); chunkfs.KindOf(r.Err) != chunkfs.KindExist || ns.ClusterID() != "CID-1" {
		t.Fatalf("another ID: %v, now %q", r.Err, ns.ClusterID())
	}
	var frozen bytes.Buffer
	if err := f.Write(&frozen); err != nil {
		t.Fatal(err)
	}
	if back, err := Restore(&frozen); err != nil || back.ClusterID() != "" {
		t.Fatalf("checkpoint frozen before the ID: %q, %v", back.ClusterID(), err)
	}
	var buf bytes.Buffer
	if err := ns.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if back, err := Restore(&buf); err != nil || back.ClusterID() != "CID-1" {
		t.Fatalf("restored: %v, %v", back, err)
	}
	buf.Reset()
	if err := ns.snapshotAs(&buf, snapshotSafeMode); err != nil {
		t.Fatal(err)
	}
	if back, err := Restore(&buf); err != nil || back.ClusterID() != "" {
		t.Fatalf("format 6: %v", err)
	}
}
