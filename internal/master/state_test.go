package master

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/oplog"
)

var _ oplog.EntryFSM = (*state)(nil)

// TestStateEntryIsAtomic applies entries of two creates each, as group
// commit logs concurrent writes, while a reader checks that whenever it
// sees an entry's index it sees both of the entry's files: a client told
// that index for its create must find its file on an observer.
func TestStateEntryIsAtomic(t *testing.T) {
	s := newState(time.Hour)
	enc := func(c *namespace.Command) []byte { return c.Encode(nil) }
	if r := s.Apply(1, enc(&namespace.Command{Op: namespace.OpInit, ChunkSize: chunkfs.DefaultChunkSize, Replication: 3})); r.(namespace.Result).Err != nil {
		t.Fatal(r)
	}
	const entries = 300
	name := func(i, k int) string { return fmt.Sprintf("/f%d-%d", i, k) }
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			var seen [2]bool
			id := s.read(func(ns *namespace.Namespace) {
				i := int(s.applied) - 2 // the entry at index i+2 created name(i, 0) and name(i, 1)
				for k := range seen {
					_, err := ns.Stat(chunkfs.Root, name(i, k))
					seen[k] = err == nil
				}
			})
			if id >= 2 && seen != [2]bool{true, true} {
				t.Errorf("at state ID %d the entry's files exist: %v", id, seen)
				return
			}
		}
	}()
	for i := range entries {
		cmds := [][]byte{
			enc(&namespace.Command{Op: namespace.OpCreate, Caller: chunkfs.Root, Path: name(i, 0), Mode: 0o644}),
			enc(&namespace.Command{Op: namespace.OpCreate, Caller: chunkfs.Root, Path: name(i, 1), Mode: 0o644}),
		}
		for _, r := range s.ApplyEntry(uint64(i+2), cmds) {
			if err := r.(namespace.Result).Err; err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
}

// TestUnreadableCommandStopsTheMaster: a logged command that does not
// decode (a newer chunkfs's encoding) stops the apply instead of being
// skipped as a refused command.
func TestUnreadableCommandStopsTheMaster(t *testing.T) {
	s := newState(time.Hour)
	cmd := (&namespace.Command{Op: namespace.OpMkdir, Caller: chunkfs.Root, Path: "/d", Mode: 0o755}).Encode(nil)
	cmd[0] = 99 // an encoding this build does not know
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "cannot be read") {
			t.Fatalf("recovered %v, want the apply stopped", r)
		}
	}()
	s.ApplyEntry(1, [][]byte{cmd})
}
