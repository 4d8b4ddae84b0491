package chunkserver

import (
	"context"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// control implements the gRPC ChunkServer service. Each handler admits
// the call, converts its request (wire.go), checks the caller, runs the
// server's own method and converts the answer back.
type control struct {
	pb.UnimplementedChunkServerServer
	s *Server
}

// registerControl puts the ChunkServer service on the server's gRPC server.
func (s *Server) registerControl() { pb.RegisterChunkServerServer(s.grpc, &control{s: s}) }

// Lease sets a chunk's version (creating the chunk if asked) and makes this
// server its primary for lease_ms, or a secondary when lease_ms is 0.
func (c *control) Lease(ctx context.Context, req *pb.LeaseRequest) (*pb.LeaseResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	g := leaseFromPB(req)
	if err := c.s.nodeOnly(ctx, "lease", g.Handle); err != nil {
		return nil, err
	}
	length, err := c.s.lease(g)
	if err != nil {
		return nil, err
	}
	return leaseToPB(length), nil
}

// Write applies pushed data at an offset as the chunk's primary.
func (c *control) Write(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	r := writeFromPB(req)
	if err := c.s.authorize(ctx, "write", r.Handle, r.Token, token.Write); err != nil {
		return nil, err
	}
	return &pb.WriteResponse{}, c.s.write(ctx, r)
}

// Append appends pushed data as one record at an offset the primary picks.
func (c *control) Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	r := appendFromPB(req)
	if err := c.s.authorize(ctx, "append", r.Handle, r.Token, token.Write); err != nil {
		return nil, err
	}
	off, err := c.s.appendRecord(ctx, r)
	if err != nil {
		return nil, err
	}
	return appendToPB(off), nil
}

// Reserve reserves room in the chunk for a record about to be pushed.
func (c *control) Reserve(ctx context.Context, req *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	r := reserveFromPB(req)
	if err := c.s.authorize(ctx, "reserve", r.Handle, r.Token, token.Write); err != nil {
		return nil, err
	}
	if err := c.s.reserve(ctx, r); err != nil {
		return nil, err
	}
	return &pb.ReserveResponse{}, nil
}

// Apply applies one mutation ordered by the primary.
func (c *control) Apply(ctx context.Context, req *pb.ApplyRequest) (*pb.ApplyResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	m := mutationFromPB(req)
	if err := c.s.nodeOnly(ctx, "apply", m.Handle); err != nil {
		return nil, err
	}
	if err := c.s.apply(m); err != nil {
		return nil, err
	}
	return &pb.ApplyResponse{}, nil
}

// Sync makes this replica, then every secondary named, fsync the chunk.
func (c *control) Sync(ctx context.Context, req *pb.SyncRequest) (*pb.SyncResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	r := syncFromPB(req)
	if err := c.s.authorize(ctx, "sync", r.Handle, r.Token, token.Write); err != nil {
		return nil, err
	}
	if err := c.s.sync(ctx, r); err != nil {
		return nil, err
	}
	return &pb.SyncResponse{}, nil
}

// Truncate cuts a chunk to a length at a version the master has bumped.
func (c *control) Truncate(ctx context.Context, req *pb.TruncateRequest) (*pb.TruncateResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	t := truncationFromPB(req)
	if err := c.s.nodeOnly(ctx, "truncate", t.Handle); err != nil {
		return nil, err
	}
	if err := c.s.truncate(t); err != nil {
		return nil, err
	}
	return &pb.TruncateResponse{}, nil
}

// ChunkInfo describes the replica and any lease held on it.
func (c *control) ChunkInfo(ctx context.Context, req *pb.ChunkInfoRequest) (*pb.ChunkInfoResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	h, tok := chunkInfoFromPB(req)
	if err := c.s.authorize(ctx, "chunk info", h, tok, token.Read); err != nil {
		return nil, err
	}
	r, err := c.s.replicaState(h)
	if err != nil {
		return nil, err
	}
	return chunkInfoToPB(r), nil
}

// DeleteChunks deletes replicas; unknown handles are ignored.
func (c *control) DeleteChunks(ctx context.Context, req *pb.DeleteChunksRequest) (*pb.DeleteChunksResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.s.nodeOnly(ctx, "delete chunks", 0); err != nil {
		return nil, err
	}
	if err := c.s.deleteChunks(handlesFromPB(req.Handles)); err != nil {
		return nil, err
	}
	return &pb.DeleteChunksResponse{}, nil
}

// Clone makes this server a new replica of a chunk pulled from a source.
func (c *control) Clone(ctx context.Context, req *pb.CloneRequest) (*pb.CloneResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	o := cloneFromPB(req)
	if err := c.s.nodeOnly(ctx, "clone", o.Handle); err != nil {
		return nil, err
	}
	n, err := c.s.cloneChunk(ctx, o)
	if err != nil {
		return nil, err
	}
	return cloneToPB(n), nil
}
