package namespace

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCheckpointDuringAppliesIsExact: a checkpoint frozen at step k of a
// random sequence and written while the following steps apply, on
// another goroutine, is byte for byte the snapshot of a namespace that
// applied only the first k steps; and it restores.
func TestCheckpointDuringAppliesIsExact(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cmds := make([]*Command, 600)
		for i := range cmds {
			cmds[i] = randomCommand(rng, int64(i+1))
		}
		k := 100 + rng.IntN(300)
		live, ref := New(), New()
		init := &Command{Op: OpInit, ChunkSize: testChunk, Replication: 3}
		live.Apply(init)
		ref.Apply(init)
		for _, c := range cmds[:k] {
			live.Apply(c)
			ref.Apply(c)
		}
		f := live.Freeze()
		var got bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- f.Write(&got) }()
		for _, c := range cmds[k:] {
			live.Apply(c)
		}
		if err := <-done; err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		want := snapshot(t, ref)
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("seed %d: checkpoint frozen at step %d differs from the state at that step", seed, k)
		}
		if _, err := Restore(bytes.NewReader(got.Bytes())); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := live.Check(); err != nil {
			t.Fatalf("seed %d: live namespace after the checkpoint: %v", seed, err)
		}
	}
}

// TestSupersededCheckpointFails: a second freeze ends the first one's
// view, and writing the first then fails rather than mixing states.
func TestSupersededCheckpointFails(t *testing.T) {
	s := newTrashTNS(t)
	first := s.ns.Freeze()
	s.ok(&Command{Op: OpCreate, Caller: alice, Path: "/alice/g", Mode: 0o644})
	second := s.ns.Freeze()
	var b bytes.Buffer
	if err := first.Write(&b); err == nil {
		t.Fatal("a superseded checkpoint was written")
	}
	b.Reset()
	if err := second.Write(&b); err != nil || !bytes.Equal(b.Bytes(), snapshot(t, s.ns)) {
		t.Fatalf("the newer checkpoint: %v", err)
	}
}
