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

// prepareCall asks the master for a primary of chunk idx, allocating the
// chunk if needed, and names suspect, a primary that did not answer. It
// returns the location (nil when the master sent none) and the cluster's
// chunk size.
func (c *Client) prepareCall(ctx context.Context, path string, idx int64, appending bool, suspect string) (*chunkLoc, int64, error) {
	resp, err := c.master.PrepareWrite(ctx, &pb.PrepareWriteRequest{Caller: c.caller, Path: path, Index: idx, Append: appending,
		Suspect: suspect})
	if err != nil {
		return nil, 0, err
	}
	c.observe(resp.StateId)
	if resp.Chunk == nil {
		return nil, resp.ChunkSize, nil
	}
	return locationFrom(resp.Chunk), resp.ChunkSize, nil
}

// commitLengthCall tells the master path has data up to length, with
// mtime (Unix ns; 0: now), and returns the file's length after.
func (c *Client) commitLengthCall(ctx context.Context, path string, length, mtime int64) (int64, error) {
	resp, err := c.master.CommitLength(ctx, &pb.CommitLengthRequest{Caller: c.caller, Path: path, Length: length, Touch: true, MtimeNs: mtime})
	if err != nil {
		return 0, err
	}
	c.observe(resp.StateId)
	return resp.Length, nil
}
