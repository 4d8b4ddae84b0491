package cluster

import (
	"bytes"
	"os"
	"testing"
)

// TestGroupSnapshotSurvivesFailover: a snapshot and a copy-on-write are
// logged through the group; after the leader is killed, the new leader
// (its reference counts derived from the same log) keeps both sides apart:
// a write to the snapshot copies again, and each side reads as written.
func TestGroupSnapshotSurvivesFailover(t *testing.T) {
	c, cl, ctx := startGroupCluster(t)
	orig := bytes.Repeat([]byte("o"), 300<<10) // two chunks
	put(t, ctx, cl, "/src", orig)
	if err := cl.Snapshot(ctx, "/src", "/snap"); err != nil {
		t.Fatal(err)
	}
	writeAtPath := func(p string, data []byte, off int64) {
		t.Helper()
		f, err := cl.OpenFile(ctx, p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data, off); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	writeAtPath("/src", []byte("SOURCE"), 0)
	if err := c.StopGroupMaster(c.Leader()); err != nil {
		t.Fatal(err)
	}
	next, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, ctx, c.GroupMasterAddr(next), cl)
	writeAtPath("/snap", []byte("SNAPSHOT"), 260<<10)
	src := append([]byte("SOURCE"), orig[6:]...)
	snap := append(append(bytes.Clone(orig[:260<<10]), "SNAPSHOT"...), orig[260<<10+8:]...)
	for p, want := range map[string][]byte{"/src": src, "/snap": snap} {
		if got, err := get(ctx, cl, p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the failover: %d bytes, %v; sides not kept apart", p, len(got), err)
		}
	}
	if err := cl.Remove(ctx, "/src"); err != nil {
		t.Fatal(err)
	}
	if got, err := get(ctx, cl, "/snap"); err != nil || !bytes.Equal(got, snap) {
		t.Errorf("the snapshot after its source was deleted: %v", err)
	}
}
