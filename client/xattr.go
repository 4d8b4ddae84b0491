package client

import (
	"context"

	"github.com/chunkfs/chunkfs/internal/reqid"
)

// XattrFlags choose how SetXattr treats an existing attribute, as
// setxattr(2)'s flags.
type XattrFlags int

const (
	XattrCreate  XattrFlags = 1 // fail with an Exist error if it exists
	XattrReplace XattrFlags = 2 // fail with a NoAttr error if it does not
)

// GetXattr returns the value of extended attribute name of path (names
// are in the user., trusted. or security. namespace). A missing attribute
// is an error of kind KindNoAttr.
func (c *Client) GetXattr(ctx context.Context, path, name string) ([]byte, error) {
	ctx = reqid.Ensure(ctx)
	path, err := checkPath("getxattr", path)
	if err != nil {
		return nil, err
	}
	v, err := c.getXattrCall(ctx, path, name)
	if err != nil {
		return nil, wrapOp("getxattr", path, err)
	}
	return v, nil
}

// ListXattr returns the names of path's extended attributes the caller
// may see, sorted.
func (c *Client) ListXattr(ctx context.Context, path string) ([]string, error) {
	ctx = reqid.Ensure(ctx)
	path, err := checkPath("listxattr", path)
	if err != nil {
		return nil, err
	}
	names, err := c.listXattrCall(ctx, path)
	if err != nil {
		return nil, wrapOp("listxattr", path, err)
	}
	return names, nil
}

// SetXattr sets extended attribute name of path to value.
func (c *Client) SetXattr(ctx context.Context, path, name string, value []byte, flags XattrFlags) error {
	ctx = reqid.Ensure(ctx)
	path, err := checkPath("setxattr", path)
	if err != nil {
		return err
	}
	if err := c.setXattrCall(ctx, path, name, value, flags); err != nil {
		return wrapOp("setxattr", path, err)
	}
	return nil
}

// RemoveXattr removes extended attribute name of path.
func (c *Client) RemoveXattr(ctx context.Context, path, name string) error {
	ctx = reqid.Ensure(ctx)
	path, err := checkPath("removexattr", path)
	if err != nil {
		return err
	}
	if err := c.removeXattrCall(ctx, path, name); err != nil {
		return wrapOp("removexattr", path, err)
	}
	return nil
}
