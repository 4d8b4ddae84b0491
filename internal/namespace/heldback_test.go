package namespace

import (
	"bytes"
	"slices"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// TestHeldBackLoggedMootAndCheckpointed: a held-back replica is recorded
// at its version (raised, never lowered, for the same server), survives a
// checkpoint and a restore, is dropped once the chunk's logged version
// passes it and when the chunk goes; a fact for a missing chunk, an
// unnamed server or version 0 fails and changes nothing, and one below the
// logged version is moot.
func TestHeldBackLoggedMootAndCheckpointed(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o640})
	h := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 0}).Chunk.Handle
	h2 := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 1}).Chunk.Handle
	s.ok(&Command{Op: OpSetVersion, Handle: h, Version: 5})
	s.ok(&Command{Op: OpHoldBack, Handle: h, Version: 5, Path: "cs-b"})
	s.ok(&Command{Op: OpHoldBack, Handle: h, Version: 5, Path: "cs-a"})
	s.ok(&Command{Op: OpHoldBack, Handle: h, Version: 6, Path: "cs-a"})
	s.ok(&Command{Op: OpHoldBack, Handle: h, Version: 4, Path: "cs-c"}) // below the logged version: moot
	s.ok(&Command{Op: OpHoldBack, Handle: h2, Version: 1, Path: "cs-c"})
	want := []HeldBack{{"cs-a", 6}, {"cs-b", 5}}
	if got := s.ns.HeldBackOf(h); !slices.Equal(got, want) {
		t.Fatalf("held back %v, want %v", got, want)
	}
	if !s.ns.IsHeldBack(h, "cs-b", 5) || s.ns.IsHeldBack(h, "cs-b", 6) || s.ns.IsHeldBack(h, "cs-c", 4) {
		t.Error("IsHeldBack answers against the facts")
	}
	s.fails(&Command{Op: OpHoldBack, Handle: 999, Version: 1, Path: "cs-a"}, chunkfs.KindNotExist)
	s.fails(&Command{Op: OpHoldBack, Handle: h, Version: 5}, chunkfs.KindInvalid)
	s.fails(&Command{Op: OpHoldBack, Handle: h, Path: "cs-a"}, chunkfs.KindInvalid)

	var buf bytes.Buffer
	if err := s.ns.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Restore(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.HeldBackOf(h); !slices.Equal(got, want) || back.Check() != nil {
		t.Fatalf("restored held back %v (check %v), want %v", got, back.Check(), want)
	}

	s.ok(&Command{Op: OpSetVersion, Handle: h, Version: 6}) // cs-b's fact is moot, cs-a's holds at 6
	if got := s.ns.HeldBackOf(h); !slices.Equal(got, []HeldBack{{"cs-a", 6}}) {
		t.Fatalf("after version 6, held back %v", got)
	}
	s.ok(&Command{Op: OpBumpVersion, Handle: h})
	if got := s.ns.HeldBackOf(h); got != nil {
		t.Fatalf("after version 7, held back %v", got)
	}
	s.ok(&Command{Op: OpDelete, Caller: alice, Path: "/alice/f"})
	if got := s.ns.HeldBackAll(); len(got) != 0 {
		t.Fatalf("after the file's deletion, held back %v", got)
	}
}

// TestHeldBackTooMany: a chunk takes at most MaxHeldBackPerChunk servers
// held back; one more fails for want of space and changes nothing.
func TestHeldBackTooMany(t *testing.T) {
	s := newTNS(t)
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/f", Mode: 0o640})
	h := s.ok(&Command{Op: OpAllocChunk, Caller: alice, Path: "/alice/f", Index: 0}).Chunk.Handle
	for i := range MaxHeldBackPerChunk {
		s.ok(&Command{Op: OpHoldBack, Handle: h, Version: 1, Path: string(rune('a' + i))})
	}
	s.fails(&Command{Op: OpHoldBack, Handle: h, Version: 1, Path: "z"}, chunkfs.KindNoSpace)
}
