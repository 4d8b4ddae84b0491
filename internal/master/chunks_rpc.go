package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
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
	fc, err := m.chunksOf(c, op, req.Path, req.FirstIndex, int64(req.Count))
	if err != nil {
		return nil, err
	}
	resp := &pb.GetChunksResponse{StateId: fc.stateID, Info: rpc.FileInfoTo(fc.info), ChunkSize: fc.chunkSize}
	for _, l := range fc.chunks {
		resp.Chunks = append(resp.Chunks, locationTo(l))
	}
	return resp, nil
}

// locationTo is a chunk's location on the wire.
func locationTo(l location) *pb.ChunkLocation {
	loc := &pb.ChunkLocation{Index: l.chunk.Index, Handle: uint64(l.chunk.Handle), Version: uint64(l.chunk.Version),
		Replicas: l.replicas, Primary: l.primary, Token: l.token}
	if l.primary != "" {
		loc.LeaseExpiryMs = l.leaseLeft.Milliseconds()
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
	if len(req.Suspect) > maxAddrLen {
		return nil, chunkfs.E(op, req.Path, chunkfs.KindInvalid, "suspect address too long")
	}
	// Placement and lease grants must finish once begun, whatever the
	// client does: a half-made grant would leave replicas and log apart.
	ctx = context.WithoutCancel(ctx)
	pw, err := m.prepareWrite(ctx, c, writeArgs{path: req.Path, index: req.Index, append: req.Append, suspect: req.Suspect})
	if err != nil {
		return nil, err
	}
	return &pb.PrepareWriteResponse{StateId: pw.stateID, Chunk: locationTo(pw.loc), ChunkSize: pw.chunkSize, Inode: pw.inode}, nil
}
