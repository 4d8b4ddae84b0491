package client

import (
	"context"

	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// RenameNoReplace moves oldpath to newpath atomically, failing with an
// error that wraps fs.ErrExist when newpath exists (rename(2) with
// RENAME_NOREPLACE): no other client can slip in between a check and
// the move.
func (c *Client) RenameNoReplace(ctx context.Context, oldpath, newpath string) error {
	ctx = reqid.Ensure(ctx)
	return c.renameWith(ctx, oldpath, newpath, &pb.RenameRequest{NoReplace: true})
}

// Exchange swaps a and b atomically: each takes the other's name (rename(2)
// with RENAME_EXCHANGE). Both must exist; they may be of different types,
// and neither may be a directory above the other.
func (c *Client) Exchange(ctx context.Context, a, b string) error {
	ctx = reqid.Ensure(ctx)
	return c.renameWith(ctx, a, b, &pb.RenameRequest{Exchange: true})
}

// renameWith sends a rename of oldpath to newpath with req's flags.
func (c *Client) renameWith(ctx context.Context, oldpath, newpath string, req *pb.RenameRequest) error {
	oldpath, newpath, err := checkPaths("rename", oldpath, newpath)
	if err != nil {
		return err
	}
	req.Caller, req.Src, req.Dst = c.caller, oldpath, newpath
	resp, err := c.master.Rename(ctx, req)
	if err != nil {
		return wrapOp("rename", oldpath, err)
	}
	c.observe(resp.StateId)
	c.Forget(oldpath)
	c.Forget(newpath)
	return nil
}
