package master

import (
	"context"
	"fmt"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/token"
)

// writeArgs names the chunk a write or a record append asks for: chunk
// index of the file at path, and the primary the client's last attempt
// failed with (suspect), if any.
type writeArgs struct {
	path    string
	index   int64
	append  bool // a record append: index must be the last chunk or the next
	suspect string
}

// maxCopyRounds bounds how often one PrepareWrite copies a shared chunk
// and finds it shared again (a snapshot taken in between each time).
const maxCopyRounds = 3

// writableChunk returns chunk w.index of the file, allocated, placed,
// not shared with a snapshot (copied first if it was: copyOnWrite) and
// leased.
func (m *Master) writableChunk(ctx context.Context, c chunkfs.Caller, w writeArgs) (namespace.Chunk, chunkfs.FileInfo, error) {
	for round := 1; ; round++ {
		ch, fi, ok, err := m.lookupWritable(c, w)
		if err != nil {
			return ch, fi, err
		}
		if ok && ch.Shared {
			if _, err := m.copyOnWrite(ctx, c, w.path, ch); err != nil {
				return ch, fi, err
			}
		}
		ch, fi, err = m.ensureChunk(ctx, c, w)
		if err == nil {
			err = m.ensureLease(ctx, w.path, ch, fi.Replication, w.suspect)
		}
		if err != errShared || round == maxCopyRounds {
			return ch, fi, err
		}
	}
}

// lookupChunk returns chunk index of the file, if it exists, with the
// file's description; the caller must be allowed to write the file.
func (m *Master) lookupChunk(c chunkfs.Caller, p string, index int64) (ch namespace.Chunk, fi chunkfs.FileInfo, ok bool, err error) {
	m.state.read(func(ns *namespace.Namespace) {
		var chunks []namespace.Chunk
		fi, chunks, err = ns.Chunks(c, p, index, 1, true)
		if err == nil && len(chunks) == 1 && chunks[0].Index == index {
			ch, ok = chunks[0], true
		}
	})
	return ch, fi, ok, err
}

// ensureChunk returns chunk index of the file, allocating it through the
// log and creating its replicas when it does not exist yet, or placing it
// when it has no replica and was never written: at the logged version when
// a create allocated it and no server was told of it since (firstChunks),
// else at a new one. Both happen under the
// file's allocation lock, so concurrent writers and appenders asking for
// the same chunk get the same one, placed once.
func (m *Master) ensureChunk(ctx context.Context, c chunkfs.Caller, w writeArgs) (namespace.Chunk, chunkfs.FileInfo, error) {
	ch, fi, ok, err := m.lookupWritable(c, w)
	if err != nil || (ok && m.placed(ch)) {
		return ch, fi, err
	}
	mu := &m.allocMu[pathStripe(w.path)]
	mu.Lock()
	defer mu.Unlock()
	if ch, fi, ok, err = m.lookupWritable(c, w); err != nil || (ok && m.placed(ch)) {
		return ch, fi, err
	}
	if ok && ch.Shared {
		return ch, fi, errShared // shared since it was looked at: copy it first
	}
	if !ok {
		cmd := &namespace.Command{Op: namespace.OpAllocChunk, Caller: c, Path: w.path, Index: w.index}
		if w.append {
			cmd.Flags = namespace.FlagAppend
		}
		r, _, err := m.apply(ctx, cmd)
		if err != nil {
			return namespace.Chunk{}, chunkfs.FileInfo{}, err
		}
		if !r.Allocated && m.placed(r.Chunk) {
			return r.Chunk, r.Info, nil
		}
		return r.Chunk, r.Info, m.placeChunk(ctx, w.path, r.Chunk, r.Info.Replication, !r.Allocated)
	}
	if fi.Length > ch.Index*m.chunkSize() {
		return ch, fi, nil // it holds data: wait for its servers (ensureLease says so)
	}
	_, floor := m.lead.leaseHold()
	told := ch.Handle < floor || !m.firsts.take(ch.Handle) // a create's first chunk was told to no one
	return ch, fi, m.placeChunk(ctx, w.path, ch, fi.Replication, told)
}

// lookupWritable looks chunk w.index up for writing, enforcing the
// append rule that it be the last chunk or the next.
func (m *Master) lookupWritable(c chunkfs.Caller, w writeArgs) (namespace.Chunk, chunkfs.FileInfo, bool, error) {
	ch, fi, ok, err := m.lookupChunk(c, w.path, w.index)
	if err == nil && w.append && w.index < fi.Chunks-1 {
		err = chunkfs.E("prepare write", w.path, chunkfs.KindStale, "append chunk index is neither the last chunk nor the next")
	}
	return ch, fi, ok, err
}

// placed reports whether the master knows a replica of ch (live or not).
func (m *Master) placed(ch namespace.Chunk) bool {
	m.regMu.Lock()
	defer m.regMu.Unlock()
	return m.reg.placed(ch.Handle)
}

func (m *Master) chunkSize() int64 {
	var size int64
	m.state.read(func(ns *namespace.Namespace) { size = ns.ChunkSize() })
	return size
}

// preparedWrite is a chunk ready for a write: where it lives, with a
// primary and read and write tokens.
type preparedWrite struct {
	stateID   uint64
	loc       location
	chunkSize int64
	inode     uint64
}

// prepareWrite makes sure, as c, that the chunk w names exists, allocating
// and placing it if needed, and that it has a primary with a valid lease
// and at least the minimum of live replicas.
func (m *Master) prepareWrite(ctx context.Context, c chunkfs.Caller, w writeArgs) (preparedWrite, error) {
	const op = "prepare write"
	ch, fi, err := m.writableChunk(ctx, c, w)
	if err != nil {
		return preparedWrite{}, err
	}
	now := m.cfg.Clock.Now()
	out := preparedWrite{inode: fi.Inode}
	out.stateID = m.state.read(func(ns *namespace.Namespace) {
		out.chunkSize = ns.ChunkSize()
		if v, ok := ns.ChunkVersion(ch.Handle); ok {
			ch.Version = v
		}
		m.regMu.Lock()
		defer m.regMu.Unlock()
		if m.reg.unlogged(ch.Handle, ch.Version) {
			// A replica left the counted set under the lease and the log
			// does not know yet: a chain without it would let writes at
			// this version skip it. The retry gets a new version.
			m.reg.fenceAway(ch.Handle)
			return
		}
		out.loc = m.locationLocked(ns, ch, now)
	})
	if out.loc.primary == "" {
		return preparedWrite{}, chunkfs.E(op, w.path, chunkfs.KindUnavailable, "lease lost; retry")
	}
	if need := m.cfg.minReplicas(fi.Replication); len(out.loc.replicas) < need {
		// A grant some replicas failed left fewer than the minimum: the
		// write waits for the chunk to be healed (it goes first).
		m.regMu.Lock()
		m.reg.block(ch.Handle, now)
		m.regMu.Unlock()
		return preparedWrite{}, chunkfs.E(op, w.path, chunkfs.KindUnavailable,
			fmt.Sprintf("the chunk has %d live replicas, below the minimum of %d; it is being re-replicated", len(out.loc.replicas), need))
	}
	locs := []location{out.loc}
	if err := m.signLocations(op, w.path, token.Read|token.Write, c.UID, locs); err != nil {
		return preparedWrite{}, err
	}
	out.loc = locs[0]
	return out, nil
}
