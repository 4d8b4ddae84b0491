package client

import (
	"context"

	"github.com/chunkfs/chunkfs/internal/reqid"
)

// RenameNoReplace moves oldpath to newpath atomically, failing with an
// error that wraps fs.ErrExist when newpath exists (rename(2) with
// RENAME_NOREPLACE): no other client can slip in between a check and
// the move.
func (c *Client) RenameNoReplace(ctx context.Context, oldpath, newpath string) error {
	ctx = reqid.Ensure(ctx)
	return c.renameWith(ctx, oldpath, newpath, renameFlags{noReplace: true})
}

// Exchange swaps a and b atomically: each takes the other's name (rename(2)
// with RENAME_EXCHANGE). Both must exist; they may be of different types,
// and neither may be a directory above the other.
func (c *Client) Exchange(ctx context.Context, a, b string) error {
	ctx = reqid.Ensure(ctx)
	return c.renameWith(ctx, a, b, renameFlags{exchange: true})
}

// renameWith sends a rename of oldpath to newpath with flags f.
func (c *Client) renameWith(ctx context.Context, oldpath, newpath string, f renameFlags) error {
	oldpath, newpath, err := checkPaths("rename", oldpath, newpath)
	if err != nil {
		return err
	}
	if err := c.renameCall(ctx, oldpath, newpath, f); err != nil {
		return wrapOp("rename", oldpath, err)
	}
	c.Forget(oldpath)
	c.Forget(newpath)
	return nil
}
