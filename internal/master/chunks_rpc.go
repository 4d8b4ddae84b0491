package master

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// GetChunks returns where count chunks of a file from first_index live.
func (m service) GetChunks(ctx context.Context, req *pb.GetChunksRequest) (*pb.GetChunksResponse, error) {
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
		resp.Info, resp.ChunkSize = rpc.FileInfoTo(fi), ns.ChunkSize()
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
func (m service) PrepareWrite(ctx context.Context, req *pb.PrepareWriteRequest) (*pb.PrepareWriteResponse, error) {
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
	ch, fi, err := m.writableChunk(ctx, c, writeArgs{path: req.Path, index: req.Index, append: req.Append, suspect: req.Suspect})
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
