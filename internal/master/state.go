package master

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/token"
)

// state adapts the namespace, and the chunk access token keys beside it
// (tokens.go), to the operation log's FSM interface and lets RPC handlers
// read them concurrently with the log applying to them.
type state struct {
	mu      sync.RWMutex // guards ns, keys, keyID, applied and notify
	ns      *namespace.Namespace
	keys    *token.Keyring // token keys logged by the leader
	keyID   uint32         // the highest key ID ever logged
	applied uint64         // index of the last applied log entry: the state ID
	notify  chan struct{}  // closed at the next apply; nil when nobody waits
	// chunkGen counts the applied commands that may change which chunks
	// hold data or their versions (chunkCommand), and restores: a count
	// of located chunks taken from the namespace holds while it stands
	// (registry_safemode.go), and so do chunk versions read under the
	// lock and used after it (versionsFor). It is raised under the lock,
	// before the command changes anything, and read anywhere.
	chunkGen atomic.Uint64
}

// newState returns an empty state whose tokens live for tokenLifetime.
func newState(tokenLifetime time.Duration) *state {
	return &state{ns: namespace.New(), keys: token.NewKeyring(tokenLifetime)}
}

// Apply applies one logged command: a token key (its result nil or an
// error) or else a namespace command (a namespace.Result). ApplyEntry
// applies the commands of one entry alike.
func (s *state) Apply(index uint64, cmd []byte) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r any
	if isKeyCommand(cmd) {
		r = s.applyKeyLocked(cmd)
	} else {
		r = s.applyNamespaceLocked(cmd)
	}
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
		if isKeyCommand(c) {
			res[i] = s.applyKeyLocked(c)
		} else {
			res[i] = s.applyNamespaceLocked(c)
		}
	}
	s.advanceLocked(index)
	return res
}

// applyNamespaceLocked applies one namespace command.
func (s *state) applyNamespaceLocked(cmd []byte) namespace.Result {
	if chunkCommand(cmd) {
		s.chunkGen.Add(1)
	}
	c, err := namespace.DecodeCommand(cmd)
	if err != nil {
		// Only leaders log commands, and they log what they encoded: one
		// that does not decode was written by a newer chunkfs. Applying
		// the rest without it would part this master's state from the
		// others'.
		panic(fmt.Sprintf("master: a logged command cannot be read (%v); this master stops rather than diverge: upgrade it", err))
	}
	return s.ns.Apply(c)
}

// chunkCommand reports whether an encoded namespace command may change
// which chunks exist or hold data (a file's length), or a chunk's version.
// The op is the second byte of the encoding (namespace.Command.Encode).
func chunkCommand(cmd []byte) bool {
	if len(cmd) < 2 {
		return true
	}
	switch namespace.Op(cmd[1]) {
	case namespace.OpInit, namespace.OpMkdir, namespace.OpLeaseHorizon, namespace.OpSetXattr,
		namespace.OpRemoveXattr, namespace.OpDecommission, namespace.OpRecommission, namespace.OpLink,
		namespace.OpTrashPeriod, namespace.OpSafeMode, namespace.OpClusterID, namespace.OpHoldBack:
		return false
	}
	return true
}

func (s *state) advanceLocked(index uint64) {
	s.applied = index
	if s.notify != nil {
		close(s.notify)
		s.notify = nil
	}
}

// Snapshot writes the token keys, if any, then the namespace; the log
// calls it between applies.
func (s *state) Snapshot(w io.Writer) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if keys := s.keys.Keys(); len(keys) > 0 || s.keyID > 0 {
		if _, err := w.Write(encodeKeySection(s.keyID, keys)); err != nil {
			return err
		}
	}
	return s.ns.Snapshot(w)
}

// Freeze captures the token keys and a frozen view of the namespace
// (namespace.Frozen) under the lock, for the log to write while applies
// go on (oplog.FreezingFSM).
func (s *state) Freeze() (func(io.Writer) error, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []byte
	if ks := s.keys.Keys(); len(ks) > 0 || s.keyID > 0 {
		keys = encodeKeySection(s.keyID, ks)
	}
	f := s.ns.Freeze()
	write := func(w io.Writer) error {
		if keys != nil {
			if _, err := w.Write(keys); err != nil {
				f.Close()
				return err
			}
		}
		return f.Write(w)
	}
	return write, f.Close, nil
}

// Restore replaces the state with a snapshot taken at index. A snapshot
// of a master that never made token keys is the namespace's alone.
func (s *state) Restore(index uint64, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	keyID, keys, rest, err := decodeKeySection(b)
	if err != nil {
		return err
	}
	ns, err := namespace.Restore(bytes.NewReader(rest))
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunkGen.Add(1)
	s.ns, s.keyID = ns, keyID
	s.keys = token.NewKeyring(s.keys.TTL())
	for _, k := range keys {
		s.keys.Add(k, time.Time{}) // the snapshot held only live keys
	}
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

// rlock takes the read lock and returns the namespace, for a caller that
// lets the lock go and takes it again as it goes (repairOnce); runlock
// lets it go.
func (s *state) rlock() *namespace.Namespace {
	s.mu.RLock()
	return s.ns
}

func (s *state) runlock() { s.mu.RUnlock() }

// readChunks is read that also passes fn the chunk generation
// (chunkGen) of the namespace it sees.
func (s *state) readChunks(fn func(ns *namespace.Namespace, gen uint64)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.ns, s.chunkGen.Load())
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

// versions holds the logged versions of some chunks, and the cluster ID,
// read under the state lock at chunk generation gen (versionsFor), for
// the registry to use under its own lock alone while gen stands: so a
// heartbeat or a registration waits for the registry lock without holding
// the state lock, and an apply (and every read queued behind it) does not
// wait for the registry. The handles are sorted, each once: a full report
// names tens of thousands, looked up by binary search.
type versions struct {
	gen     uint64
	cluster string
	handles []chunkfs.Handle
	at      []versionAt // at[i] is handles[i]'s
}

type versionAt struct {
	v  chunkfs.Version
	ok bool
}

// versionsFor reads the versions of handles and returns them with the
// state ID they were read at. Sorting them is done before the lock.
func (s *state) versionsFor(handles ...[]chunkfs.Handle) (versions, uint64) {
	n := 0
	for _, hs := range handles {
		n += len(hs)
	}
	all := make([]chunkfs.Handle, 0, n)
	for _, hs := range handles {
		all = append(all, hs...)
	}
	slices.Sort(all)
	out := versions{handles: slices.Compact(all)}
	out.at = make([]versionAt, len(out.handles))
	s.mu.RLock()
	defer s.mu.RUnlock()
	out.gen, out.cluster = s.chunkGen.Load(), s.ns.ClusterID()
	for i, h := range out.handles {
		v, ok := s.ns.ChunkVersion(h)
		out.at[i] = versionAt{v, ok}
	}
	return out, s.applied
}

// current reports whether no chunk command was applied, or began to be,
// since the versions were read: they are the namespace's still.
func (s *state) current(vs versions) bool { return s.chunkGen.Load() == vs.gen }

// version answers from vs. A handle not read (none should be asked) is
// answered as existing at version 0, below every replica's: no rule
// condemns, counts or adopts a replica on that answer.
func (vs versions) version(h chunkfs.Handle) (chunkfs.Version, bool) {
	if i, ok := slices.BinarySearch(vs.handles, h); ok {
		return vs.at[i].v, vs.at[i].ok
	}
	return 0, true
}
