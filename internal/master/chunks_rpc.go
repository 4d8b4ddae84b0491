package master

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// GetChunks returns where count chunks of a file from first_index live.
func (m *Master) GetChunks(ctx context.Context, req *pb.GetChunksRequest) (*pb.GetChunksResponse, error) {
	const op = "get chunks"
	c, err := m.pathArg(ctx, "GetChunks", op, req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if err := m.readable(ctx, op, req.MinStateId); err != nil {
		return nil, err
	}
	now := m.cfg.Clock.Now()
	resp := &pb.GetChunksResponse{}
	resp.StateId = m.state.read(func(ns *namespace.Namespace) {
		var fi chunkfs.FileInfo
		var chunks []namespace.Chunk
		fi, chunks, err = ns.Chunks(c, req.Path, req.FirstIndex, int(min(req.Count, namespace.MaxChunkCount)), false)
		if err != nil {
			return
		}
		resp.Info, resp.ChunkSize = fileInfo(fi), ns.ChunkSize()
		m.regMu.Lock()
		defer m.regMu.Unlock()
		for _, ch := range chunks {
			resp.Chunks = append(resp.Chunks, m.locationLocked(ch, now))
		}
	})
	if err != nil {
		return nil, err
	}
	if err := m.signLocations(op, req.Path, token.Read, c.UID, resp.Chunks...); err != nil {
		return nil, err
	}
	if !m.leads() {
		for _, cl := range resp.Chunks {
			if len(cl.Replicas) == 0 {
				// It may be a chunk this master has not heard of from
				// its chunkservers yet (HDFS-13924): the leader knows.
				return nil, m.notLeader(op)
			}
		}
	}
	return resp, nil
}

// locationLocked describes where chunk ch lives: live replicas with its
// current version, the primary first when it holds a valid lease.
func (m *Master) locationLocked(ch namespace.Chunk, now time.Time) *pb.ChunkLocation {
	loc := &pb.ChunkLocation{Index: ch.Index, Handle: uint64(ch.Handle), Version: uint64(ch.Version)}
	primary, expiry := m.reg.lease(ch.Handle, now)
	if primary != nil && primary.chunks.at(ch.Handle) == ch.Version {
		loc.Primary = primary.addr
		loc.LeaseExpiryMs = max((expiry.Sub(now) - m.leaseSlack()).Milliseconds(), 1)
		loc.Replicas = append(loc.Replicas, primary.addr)
	}
	for _, s := range m.reg.replicas(ch.Handle, ch.Version) {
		if s != primary {
			loc.Replicas = append(loc.Replicas, s.addr)
		}
	}
	return loc
}

// PrepareWrite makes sure chunk index of a file exists, allocating and
// placing it if needed, and that it has a primary with a valid lease.
func (m *Master) PrepareWrite(ctx context.Context, req *pb.PrepareWriteRequest) (*pb.PrepareWriteResponse, error) {
	const op = "prepare write"
	c, err := m.pathArg(ctx, "PrepareWrite", op, req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	if req.Index < 0 || req.Index >= namespace.MaxFileChunks {
		return nil, chunkfs.E(op, req.Path, chunkfs.KindInvalid, "chunk index out of range")
	}
	// Placement and lease grants must finish once begun, whatever the
	// client does: a half-made grant would leave replicas and log apart.
	ctx = context.WithoutCancel(ctx)
	if len(req.Suspect) > maxAddrLen {
		return nil, chunkfs.E(op, req.Path, chunkfs.KindInvalid, "suspect address too long")
	}
	ch, fi, err := m.writableChunk(ctx, c, req)
	if err != nil {
		return nil, err
	}
	now := m.cfg.Clock.Now()
	resp := &pb.PrepareWriteResponse{Inode: fi.Inode}
	resp.StateId = m.state.read(func(ns *namespace.Namespace) {
		resp.ChunkSize = ns.ChunkSize()
		if v, ok := ns.ChunkVersion(ch.Handle); ok {
			ch.Version = v
		}
		m.regMu.Lock()
		defer m.regMu.Unlock()
		resp.Chunk = m.locationLocked(ch, now)
	})
	if resp.Chunk.Primary == "" {
		return nil, chunkfs.E(op, req.Path, chunkfs.KindUnavailable, "lease lost; retry")
	}
	if need := m.cfg.minReplicas(fi.Replication); len(resp.Chunk.Replicas) < need {
		// A grant some replicas failed left fewer than the minimum: the
		// write waits for the chunk to be healed (it goes first).
		m.regMu.Lock()
		m.reg.block(ch.Handle, now)
		m.regMu.Unlock()
		return nil, chunkfs.E(op, req.Path, chunkfs.KindUnavailable,
			fmt.Sprintf("the chunk has %d live replicas, below the minimum of %d; it is being re-replicated", len(resp.Chunk.Replicas), need))
	}
	if err := m.signLocations(op, req.Path, token.Read|token.Write, c.UID, resp.Chunk); err != nil {
		return nil, err
	}
	return resp, nil
}

// maxCopyRounds bounds how often one PrepareWrite copies a shared chunk
// and finds it shared again (a snapshot taken in between each time).
const maxCopyRounds = 3

// writableChunk returns chunk req.Index of the file, allocated, placed,
// not shared with a snapshot (copied first if it was: copyOnWrite) and
// leased.
func (m *Master) writableChunk(ctx context.Context, c chunkfs.Caller, req *pb.PrepareWriteRequest) (namespace.Chunk, chunkfs.FileInfo, error) {
	for round := 1; ; round++ {
		ch, fi, ok, err := m.lookupWritable(c, req)
		if err != nil {
			return ch, fi, err
		}
		if ok && ch.Shared {
			if _, err := m.copyOnWrite(ctx, c, req.Path, ch); err != nil {
				return ch, fi, err
			}
		}
		ch, fi, err = m.ensureChunk(ctx, c, req)
		if err == nil {
			err = m.ensureLease(ctx, req.Path, ch, fi.Replication, req.Suspect)
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
func (m *Master) ensureChunk(ctx context.Context, c chunkfs.Caller, req *pb.PrepareWriteRequest) (namespace.Chunk, chunkfs.FileInfo, error) {
	ch, fi, ok, err := m.lookupWritable(c, req)
	if err != nil || (ok && m.placed(ch)) {
		return ch, fi, err
	}
	mu := &m.allocMu[pathStripe(req.Path)]
	mu.Lock()
	defer mu.Unlock()
	if ch, fi, ok, err = m.lookupWritable(c, req); err != nil || (ok && m.placed(ch)) {
		return ch, fi, err
	}
	if ok && ch.Shared {
		return ch, fi, errShared // shared since it was looked at: copy it first
	}
	if !ok {
		cmd := &namespace.Command{Op: namespace.OpAllocChunk, Caller: c, Path: req.Path, Index: req.Index}
		if req.Append {
			cmd.Flags = namespace.FlagAppend
		}
		r, _, err := m.apply(ctx, cmd)
		if err != nil {
			return namespace.Chunk{}, chunkfs.FileInfo{}, err
		}
		if !r.Allocated && m.placed(r.Chunk) {
			return r.Chunk, r.Info, nil
		}
		return r.Chunk, r.Info, m.placeChunk(ctx, req.Path, r.Chunk, r.Info.Replication, !r.Allocated)
	}
	if fi.Length > ch.Index*m.chunkSize() {
		return ch, fi, nil // it holds data: wait for its servers (ensureLease says so)
	}
	_, floor := m.lead.leaseHold()
	told := ch.Handle < floor || !m.firsts.take(ch.Handle) // a create's first chunk was told to no one
	return ch, fi, m.placeChunk(ctx, req.Path, ch, fi.Replication, told)
}

// lookupWritable looks chunk req.Index up for writing, enforcing the
// append rule that it be the last chunk or the next.
func (m *Master) lookupWritable(c chunkfs.Caller, req *pb.PrepareWriteRequest) (namespace.Chunk, chunkfs.FileInfo, bool, error) {
	ch, fi, ok, err := m.lookupChunk(c, req.Path, req.Index)
	if err == nil && req.Append && req.Index < fi.Chunks-1 {
		err = chunkfs.E("prepare write", req.Path, chunkfs.KindStale, "append chunk index is neither the last chunk nor the next")
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
