package client

import (
	"context"

	"github.com/chunkfs/chunkfs/internal/reqid"
)

// Snapshot makes dst a copy-on-write snapshot of the file or directory
// tree at src, atomically (GFS §3.4): dst gets new inodes with src's
// attributes, sharing src's chunks, and a later write, append or
// truncation on either side copies the chunk it touches first, so the
// other side never changes. The caller needs read permission on
// everything copied and write permission on dst's directory; dst must not
// exist nor lie inside src. While a lease on one of src's chunks cannot
// be revoked (its primary is unreachable) the call fails with
// KindUnavailable, naming when to retry; nothing is changed then.
func (c *Client) Snapshot(ctx context.Context, src, dst string) error {
	ctx = reqid.Ensure(ctx)
	src, dst, err := checkPaths("snapshot", src, dst)
	if err != nil {
		return err
	}
	if err := c.snapshotCall(ctx, src, dst); err != nil {
		return wrapOp("snapshot", src, err)
	}
	// The source's leases were revoked (its chunks' versions moved on):
	// what this client cached of them is stale.
	c.Forget(src)
	c.Forget(dst)
	return nil
}
