package master

import (
	"context"
	"io"
	"sync"

	"github.com/chunkfs/chunkfs/internal/namespace"
)

// state adapts the namespace to the operation log's FSM interface and lets
// RPC handlers read it concurrently with the log applying to it.
type state struct {
	mu      sync.RWMutex // guards ns, applied and notify
	ns      *namespace.Namespace
	applied uint64        // index of the last applied log entry: the state ID
	notify  chan struct{} // closed at the next apply; nil when nobody waits
}

func newState() *state { return &state{ns: namespace.New()} }

// Apply applies one logged command; the result is a namespace.Result.
func (s *state) Apply(index uint64, cmd []byte) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.ns.ApplyEncoded(cmd)
	s.advanceLocked(index)
	return r
}

// ApplyEntry applies the commands of one log entry under one hold of the
// lock, and only then advances the state ID: a read at the entry's index
// sees all of them (oplog.EntryFSM).
func (s *state) ApplyEntry(index uint64, cmds [][]byte) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := make([]any, len(cmds))
	for i, c := range cmds {
		res[i] = s.ns.ApplyEncoded(c)
	}
	s.advanceLocked(index)
	return res
}

func (s *state) advanceLocked(index uint64) {
	s.applied = index
	if s.notify != nil {
		close(s.notify)
		s.notify = nil
	}
}

// Snapshot writes the namespace; the log calls it between applies.
func (s *state) Snapshot(w io.Writer) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ns.Snapshot(w)
}

// Restore replaces the namespace with a snapshot taken at index.
func (s *state) Restore(index uint64, r io.Reader) error {
	ns, err := namespace.Restore(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ns = ns
	s.advanceLocked(index)
	return nil
}

// read runs fn with the namespace under the read lock and returns the state
// ID fn saw.
func (s *state) read(fn func(ns *namespace.Namespace)) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.ns)
	return s.applied
}

// stateID returns the last applied index.
func (s *state) stateID() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied
}

// waitApplied waits until index is applied or ctx ends.
func (s *state) waitApplied(ctx context.Context, index uint64) bool {
	for {
		s.mu.Lock()
		if s.applied >= index {
			s.mu.Unlock()
			return true
		}
		if s.notify == nil {
			s.notify = make(chan struct{})
		}
		ch := s.notify
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
