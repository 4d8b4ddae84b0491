package client

import (
	"context"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// The master's chunk calls on the wire: look-ups of a file's chunks and
// reports of corrupt replicas. Locations come back as chunkLoc values with
// the replicas in the master's order (nearness sorts them).

// chunkPage is the answer to a look-up: the file as the master saw it,
// the cluster's chunk size, and the chunks it located (holes absent).
type chunkPage struct {
	file      *chunkfs.FileInfo
	chunkSize int64
	chunks    []*chunkLoc
}

// getChunksCall looks up count chunks of path from index first (count 0:
// the master's default).
func (c *Client) getChunksCall(ctx context.Context, path string, first int64, count int) (chunkPage, error) {
	resp, err := c.master.GetChunks(ctx, &pb.GetChunksRequest{Caller: c.caller, Path: path, FirstIndex: first,
		Count: uint32(count), MinStateId: c.readState(ctx)})
	if err != nil {
		return chunkPage{}, err
	}
	c.observe(resp.StateId)
	page := chunkPage{file: rpc.FileInfoOf(resp.Info), chunkSize: resp.ChunkSize, chunks: make([]*chunkLoc, 0, len(resp.Chunks))}
	for _, cl := range resp.Chunks {
		page.chunks = append(page.chunks, locationFrom(cl))
	}
	return page, nil
}

// locationFrom is a chunk location from the wire, replicas in the
// master's order.
func locationFrom(cl *pb.ChunkLocation) *chunkLoc {
	return &chunkLoc{
		index: cl.Index, handle: chunkfs.Handle(cl.Handle), version: chunkfs.Version(cl.Version),
		replicas: slices.Clone(cl.Replicas), primary: cl.Primary,
		leaseLeft: time.Duration(cl.LeaseExpiryMs) * time.Millisecond,
		token:     slices.Clone(cl.Token),
	}
}

func (c *Client) reportCorruptCall(ctx context.Context, h chunkfs.Handle, addr string) error {
	_, err := c.master.ReportCorrupt(ctx, &pb.ReportCorruptRequest{Reporter: "client", Handle: uint64(h), Replica: addr})
	return err
}
