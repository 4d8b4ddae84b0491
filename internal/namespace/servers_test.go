package namespace

import (
	"bytes"
	"slices"
	"testing"
)

// TestDecommissionIntentIsLoggedAndCheckpointed: decommission and
// recommission commands are idempotent, survive encoding, and the set they
// leave is kept by a snapshot.
func TestDecommissionIntentIsLoggedAndCheckpointed(t *testing.T) {
	ns := New()
	for _, c := range []*Command{
		{Op: OpDecommission, Path: "cs2"}, {Op: OpDecommission, Path: "cs1"},
		{Op: OpDecommission, Path: "cs2"}, {Op: OpDecommission, Path: "cs3"},
		{Op: OpRecommission, Path: "cs3"}, {Op: OpRecommission, Path: "cs9"},
	} {
		if r := ns.ApplyEncoded(c.Encode(nil)); r.Err != nil {
			t.Fatalf("%v %s: %v", c.Op, c.Path, r.Err)
		}
	}
	if got := ns.Draining(); !slices.Equal(got, []string{"cs1", "cs2"}) {
		t.Fatalf("draining %v, want [cs1 cs2]", got)
	}
	if r := ns.Apply(&Command{Op: OpDecommission}); r.Err == nil {
		t.Error("an empty chunkserver ID was accepted")
	}
	var buf bytes.Buffer
	if err := ns.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Restore(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Draining(); !slices.Equal(got, []string{"cs1", "cs2"}) {
		t.Fatalf("restored draining %v, want [cs1 cs2]", got)
	}
}

// TestRestoreOlderFormats: a snapshot written before the decommission
// list existed (formats 1 and 2) still restores, with no server being
// decommissioned.
func TestRestoreOlderFormats(t *testing.T) {
	ns := New()
	ns.Apply(&Command{Op: OpDecommission, Path: "cs1"})
	for _, v := range []byte{1, 2} {
		var buf bytes.Buffer
		if err := ns.snapshotAs(&buf, v); err != nil {
			t.Fatal(err)
		}
		back, err := Restore(&buf)
		if err != nil {
			t.Fatalf("format %d: %v", v, err)
		}
		if len(back.Draining()) != 0 {
			t.Errorf("format %d: draining %v", v, back.Draining())
		}
	}
}
