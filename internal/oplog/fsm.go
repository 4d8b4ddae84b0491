package oplog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// fsmAdapter turns an FSM into a raft.BatchingFSM.
type fsmAdapter struct {
	fsm     FSM
	applied *atomic.Uint64
	moved   func() // called after the applied index moves
}

var _ raft.BatchingFSM = (*fsmAdapter)(nil)

func (a *fsmAdapter) Apply(l *raft.Log) any { return a.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies each command of each entry; an entry's result is the
// slice of its commands' results.
func (a *fsmAdapter) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = a.applyEntry(l)
		}
		a.applied.Store(l.Index)
	}
	a.moved()
	return out
}

// applyEntry applies one committed entry. One this master cannot read
// (corrupt on its disk, or written by a newer chunkfs) stops it: applying
// the rest without it would let its state part from the others' silently.
func (a *fsmAdapter) applyEntry(l *raft.Log) []any {
	cmds, err := decodeBatch(l.Data)
	if err != nil {
		panic(fmt.Sprintf("oplog: committed entry %d cannot be read (%v); this master stops rather than diverge: upgrade it, or rebuild its directory from another master", l.Index, err))
	}
	if ef, ok := a.fsm.(EntryFSM); ok {
		return ef.ApplyEntry(l.Index, cmds)
	}
	res := make([]any, len(cmds))
	for i, c := range cmds {
		res[i] = a.fsm.Apply(l.Index, c)
	}
	return res
}

// Snapshot captures the state on the apply goroutine, so that later
// entries cannot change what is persisted: a FreezingFSM's frozen view,
// written by Persist while applies go on, or else the serialised state.
// The applied index goes first, as 8 big-endian bytes.
func (a *fsmAdapter) Snapshot() (raft.FSMSnapshot, error) {
	if ff, ok := a.fsm.(FreezingFSM); ok {
		write, release, err := ff.Freeze()
		if err != nil {
			return nil, err
		}
		return &frozenSnapshot{index: a.applied.Load(), write: write, release: release}, nil
	}
	var b bytes.Buffer
	b.Write(binary.BigEndian.AppendUint64(nil, a.applied.Load()))
	if err := a.fsm.Snapshot(&b); err != nil {
		return nil, err
	}
	return &snapshot{data: b.Bytes()}, nil
}

func (a *fsmAdapter) Restore(r io.ReadCloser) error {
	defer r.Close()
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("oplog: snapshot header: %w", err)
	}
	index := binary.BigEndian.Uint64(hdr[:])
	if err := a.fsm.Restore(index, r); err != nil {
		return err
	}
	a.applied.Store(index)
	a.moved()
	return nil
}

type snapshot struct{ data []byte }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

// frozenSnapshot is a FreezingFSM's capture, written by Persist on the
// log's snapshot goroutine.
type frozenSnapshot struct {
	index   uint64
	write   func(io.Writer) error
	release func()
}

func (s *frozenSnapshot) Persist(sink raft.SnapshotSink) error {
	_, err := sink.Write(binary.BigEndian.AppendUint64(nil, s.index))
	if err == nil {
		err = s.write(sink)
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *frozenSnapshot) Release() { s.release() }

// slogWriter forwards the Raft library's log lines to a slog.Logger.
type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if line != "" {
		w.log.Warn(line, "component", "raft")
	}
	return len(p), nil
}
