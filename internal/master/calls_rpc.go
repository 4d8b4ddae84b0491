package master

// The master's calls to chunkservers, each from domain values to the
// request on the wire.

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// leaseCall tells the chunkserver at addr of chunk ch's lease: leaseMs of
// it when the server is the primary, none for a secondary; create, when
// the chunk is new to it.
func (m *Master) leaseCall(ctx context.Context, addr string, ch namespace.Chunk, create bool, leaseMs int64) error {
	req := &pb.LeaseRequest{Handle: uint64(ch.Handle), Version: uint64(ch.Version), Create: create, LeaseMs: leaseMs}
	cs, err := m.pool.ChunkServer(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RPCTimeout)
	defer cancel()
	_, err = cs.Lease(ctx, req)
	if err != nil {
		m.cfg.Logger.WarnContext(ctx, "lease call failed", "addr", addr, "handle", req.Handle, "version", req.Version, "err", err)
	}
	return err
}

// truncateCall has the chunkserver at addr cut its replica of a chunk.
func (m *Master) truncateCall(ctx context.Context, addr string, cut namespace.Cut) error {
	cs, err := m.pool.ChunkServer(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RPCTimeout)
	defer cancel()
	_, err = cs.Truncate(ctx, &pb.TruncateRequest{Handle: uint64(cut.Handle), Version: uint64(cut.Version), Length: cut.Length})
	if err != nil {
		m.cfg.Logger.WarnContext(ctx, "truncate call failed", "addr", addr, "handle", cut.Handle, "err", err)
	}
	return err
}

// cloneCall has the order's target copy the chunk from its source.
func (m *Master) cloneCall(ctx context.Context, o cloneOrder) error {
	cs, err := m.pool.ChunkServer(o.targetAddr)
	if err != nil {
		return err
	}
	_, err = cs.Clone(ctx, &pb.CloneRequest{Handle: uint64(o.handle), Version: uint64(o.version), Source: o.sourceAddr, Length: o.length,
		Urgent: o.live <= 1 && !o.move})
	return err
}

// copyCall has the chunkserver at addr copy its replica of ch locally,
// under handle nh.
func (m *Master) copyCall(ctx context.Context, addr string, ch namespace.Chunk, nh chunkfs.Handle) error {
	req := &pb.CopyChunkRequest{Handle: uint64(ch.Handle), Version: uint64(ch.Version), NewHandle: uint64(nh)}
	cs, err := m.pool.ChunkServer(addr)
	if err != nil {
		return err
	}
	// A local copy of a whole chunk: allow for a slow disk.
	ctx, cancel := context.WithTimeout(ctx, 4*m.cfg.RPCTimeout)
	defer cancel()
	_, err = cs.CopyChunk(ctx, req)
	if err != nil {
		m.cfg.Logger.WarnContext(ctx, "copy call failed", "addr", addr, "handle", req.Handle, "copy", req.NewHandle, "err", err)
	}
	return err
}

// replicaVersion asks the chunkserver at addr for its replica's version
// and whether the replica's last mutation failed for want of space.
func (m *Master) replicaVersion(ctx context.Context, addr string, h chunkfs.Handle) (v chunkfs.Version, noSpace bool, err error) {
	cs, err := m.pool.ChunkServer(addr)
	if err != nil {
		return 0, false, err
	}
	resp, err := cs.ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: uint64(h)})
	if err != nil {
		return 0, false, err
	}
	return chunkfs.Version(resp.Version), resp.NoSpace, nil
}
