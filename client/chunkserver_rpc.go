package client

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// The chunkservers' control calls on the wire, each sent to the primary
// of loc with the other replicas as its secondaries and loc's token. (The
// data itself goes over the data path, rpc.DataClient.)

// writeCall asks the primary to apply the pushed data id, length bytes,
// at offset off of the chunk on every replica.
func (c *Client) writeCall(ctx context.Context, loc *chunkLoc, off int64, id chunkfs.DataID, length int) error {
	cs, err := c.pool.ChunkServer(loc.primary)
	if err != nil {
		return err
	}
	_, err = cs.Write(ctx, &pb.WriteRequest{
		Handle: uint64(loc.handle), Version: uint64(loc.version), Offset: off,
		DataId: uint64(id), Length: int64(length), Secondaries: secondaries(loc), Token: loc.token,
	})
	return err
}

// syncCall makes every replica of the chunk fsync.
func (c *Client) syncCall(ctx context.Context, loc *chunkLoc) error {
	cs, err := c.pool.ChunkServer(loc.primary)
	if err != nil {
		return err
	}
	_, err = cs.Sync(ctx, &pb.SyncRequest{Handle: uint64(loc.handle), Version: uint64(loc.version), Secondaries: secondaries(loc), Token: loc.token})
	return err
}

// reserveCall reserves room for a record of length bytes, to be pushed
// as data id, at the end of the chunk.
func (c *Client) reserveCall(ctx context.Context, loc *chunkLoc, id chunkfs.DataID, length int, chunkSize int64) error {
	cs, err := c.pool.ChunkServer(loc.primary)
	if err != nil {
		return err
	}
	_, err = cs.Reserve(ctx, &pb.ReserveRequest{
		Handle: uint64(loc.handle), Version: uint64(loc.version), DataId: uint64(id),
		Length: int64(length), Secondaries: secondaries(loc), ChunkSize: chunkSize, Token: loc.token,
	})
	return err
}

// appendCall appends the pushed record id, length bytes, to the chunk on
// every replica and returns the offset the primary chose.
func (c *Client) appendCall(ctx context.Context, loc *chunkLoc, id chunkfs.DataID, length int, chunkSize int64) (int64, error) {
	cs, err := c.pool.ChunkServer(loc.primary)
	if err != nil {
		return 0, err
	}
	resp, err := cs.Append(ctx, &pb.AppendRequest{
		Handle: uint64(loc.handle), Version: uint64(loc.version), DataId: uint64(id),
		Length: int64(length), Secondaries: secondaries(loc), ChunkSize: chunkSize, Token: loc.token,
	})
	if err != nil {
		return 0, err
	}
	return resp.Offset, nil
}
