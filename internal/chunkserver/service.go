package chunkserver

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// control implements the gRPC ChunkServer service. Each handler converts
// its request (wire.go), admits the call once the caller passes its check
// (Server.enterNode, enterClient), runs the server's own method and
// converts the answer back. An empty answer goes back with the error,
// which gRPC then sends instead.
type control struct {
	pb.UnimplementedChunkServerServer
	s *Server
}

// registerControl puts the ChunkServer service on the server's gRPC server.
func (s *Server) registerControl() { pb.RegisterChunkServerServer(s.grpc, &control{s: s}) }

// Lease sets a chunk's version (creating the chunk if asked) and makes this
// server its primary for lease_ms, or a secondary when lease_ms is 0.
func (c *control) Lease(ctx context.Context, req *pb.LeaseRequest) (*pb.LeaseResponse, error) {
	g := leaseFrom(req)
	done, err := c.s.enterNode(ctx, "lease", g.Handle)
	if err != nil {
		return nil, err
	}
	defer done()
	length, err := c.s.lease(g)
	if err != nil {
		return nil, err
	}
	return leaseTo(length), nil
}

// Write applies pushed data at an offset as the chunk's primary.
func (c *control) Write(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResponse, error) {
	r := writeFrom(req)
	done, err := c.s.enterClient(ctx, "write", r.Handle, r.Token, token.Write)
	if err != nil {
		return nil, err
	}
	defer done()
	return &pb.WriteResponse{}, c.s.write(ctx, r)
}

// Append appends pushed data as one record at an offset the primary picks.
func (c *control) Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	r := appendFrom(req)
	done, err := c.s.enterClient(ctx, "append", r.Handle, r.Token, token.Write)
	if err != nil {
		return nil, err
	}
	defer done()
	off, err := c.s.appendRecord(ctx, r)
	if err != nil {
		return nil, err
	}
	return appendTo(off), nil
}

// Reserve reserves room in the chunk for a record about to be pushed.
func (c *control) Reserve(ctx context.Context, req *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	r := reserveFrom(req)
	done, err := c.s.enterClient(ctx, "reserve", r.Handle, r.Token, token.Write)
	if err != nil {
		return nil, err
	}
	defer done()
	return &pb.ReserveResponse{}, c.s.reserve(ctx, r)
}

// Apply applies one mutation ordered by the primary.
func (c *control) Apply(ctx context.Context, req *pb.ApplyRequest) (*pb.ApplyResponse, error) {
	m := mutationFrom(req)
	done, err := c.s.enterNode(ctx, "apply", m.Handle)
	if err != nil {
		return nil, err
	}
	defer done()
	return &pb.ApplyResponse{}, c.s.apply(m)
}

// Sync makes this replica, then every secondary named, fsync the chunk.
func (c *control) Sync(ctx context.Context, req *pb.SyncRequest) (*pb.SyncResponse, error) {
	r := syncFrom(req)
	done, err := c.s.enterClient(ctx, "sync", r.Handle, r.Token, token.Write)
	if err != nil {
		return nil, err
	}
	defer done()
	return &pb.SyncResponse{}, c.s.sync(ctx, r)
}

// Truncate cuts a chunk to a length at a version the master has bumped.
func (c *control) Truncate(ctx context.Context, req *pb.TruncateRequest) (*pb.TruncateResponse, error) {
	t := truncationFrom(req)
	done, err := c.s.enterNode(ctx, "truncate", t.Handle)
	if err != nil {
		return nil, err
	}
	defer done()
	return &pb.TruncateResponse{}, c.s.truncate(t)
}

// ChunkInfo describes the replica and any lease held on it.
func (c *control) ChunkInfo(ctx context.Context, req *pb.ChunkInfoRequest) (*pb.ChunkInfoResponse, error) {
	h, tok := chunkInfoFrom(req)
	done, err := c.s.enterClient(ctx, "chunk info", h, tok, token.Read)
	if err != nil {
		return nil, err
	}
	defer done()
	r, err := c.s.replicaState(h)
	if err != nil {
		return nil, err
	}
	return chunkInfoTo(r), nil
}

// DeleteChunks deletes replicas; unknown handles are ignored.
func (c *control) DeleteChunks(ctx context.Context, req *pb.DeleteChunksRequest) (*pb.DeleteChunksResponse, error) {
	done, err := c.s.enterNode(ctx, "delete chunks", 0)
	if err != nil {
		return nil, err
	}
	defer done()
	return &pb.DeleteChunksResponse{}, c.s.deleteChunks(handlesFrom(req.Handles))
}

// CopyChunk copies a replica locally under a new handle (a snapshot's
// copy on write).
func (c *control) CopyChunk(ctx context.Context, req *pb.CopyChunkRequest) (*pb.CopyChunkResponse, error) {
	h := chunkfs.Handle(req.Handle)
	done, err := c.s.enterNode(ctx, "copy chunk", h)
	if err != nil {
		return nil, err
	}
	defer done()
	n, err := c.s.copyChunk(h, chunkfs.Version(req.Version), chunkfs.Handle(req.NewHandle))
	if err != nil {
		return nil, err
	}
	return &pb.CopyChunkResponse{Length: n}, nil
}

// Clone makes this server a new replica of a chunk pulled from a source.
func (c *control) Clone(ctx context.Context, req *pb.CloneRequest) (*pb.CloneResponse, error) {
	o := cloneFrom(req)
	done, err := c.s.enterNode(ctx, "clone", o.Handle)
	if err != nil {
		return nil, err
	}
	defer done()
	n, err := c.s.cloneChunk(ctx, o)
	if err != nil {
		return nil, err
	}
	return cloneTo(n), nil
}
