package oplog

import (
	"context"
	"sync"
	"testing"
)

// entryFSM is a listFSM that takes each entry's commands in one call.
type entryFSM struct {
	listFSM
	mu      sync.Mutex // guards entries
	entries [][]string
}

func (f *entryFSM) ApplyEntry(index uint64, cmds [][]byte) []any {
	f.mu.Lock()
	var e []string
	for _, c := range cmds {
		e = append(e, string(c))
	}
	f.entries = append(f.entries, e)
	f.mu.Unlock()
	res := make([]any, len(cmds))
	for i, c := range cmds {
		res[i] = f.listFSM.Apply(index, c)
	}
	return res
}

// TestEntryFSMTakesWholeEntries checks that an EntryFSM gets the commands
// logged together in one ApplyEntry call, and that their results come back.
func TestEntryFSMTakesWholeEntries(t *testing.T) {
	fsm := &entryFSM{}
	l := open(t, t.TempDir(), fsm)
	defer l.Close()
	res, _, err := l.ApplyAll(context.Background(), [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	if err != nil || len(res) != 3 || res[2].(int) != 3 {
		t.Fatalf("ApplyAll = %v, %v", res, err)
	}
	fsm.mu.Lock()
	defer fsm.mu.Unlock()
	last := fsm.entries[len(fsm.entries)-1]
	if len(last) != 3 || last[0] != "a" || last[2] != "c" {
		t.Errorf("entries %q: want the last to be a, b, c", fsm.entries)
	}
}
