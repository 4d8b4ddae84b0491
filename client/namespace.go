package client

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// Mkdir makes directory path with permission bits perm (less Config.Umask).
// Its parent must exist.
func (c *Client) Mkdir(ctx context.Context, path string, perm fs.FileMode) error {
	_, _, err := c.MkdirParent(ctx, path, perm)
	return err
}

// MkdirParent is Mkdir that also returns the new directory's attributes
// and those of its parent just after, as the master saw them (parent is
// nil when it did not say): the FUSE mount answers the kernel's next look
// at the parent with them.
func (c *Client) MkdirParent(ctx context.Context, path string, perm fs.FileMode) (fi, parent *chunkfs.FileInfo, err error) {
	ctx = reqid.Ensure(ctx)
	return c.mkdir(ctx, "mkdir", path, perm, false)
}

// MkdirAll makes directory path and any missing parents, like mkdir -p. It
// is not an error if path already is a directory.
func (c *Client) MkdirAll(ctx context.Context, path string, perm fs.FileMode) error {
	ctx = reqid.Ensure(ctx)
	_, _, err := c.mkdir(ctx, "mkdir", path, perm, true)
	return err
}

func (c *Client) mkdir(ctx context.Context, op, path string, perm fs.FileMode, parents bool) (fi, parent *chunkfs.FileInfo, err error) {
	path, err = checkPath(op, path)
	if err != nil {
		return nil, nil, err
	}
	fi, parent, err = c.mkdirCall(ctx, path, uint32(perm&modeBits&^c.cfg.Umask), parents)
	if err != nil {
		return nil, nil, wrapOp(op, path, err)
	}
	return fi, parent, nil
}

// modeBits are the permission bits a client may set.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Stat returns the metadata of path. A symbolic link is described itself,
// not followed.
func (c *Client) Stat(ctx context.Context, path string) (*chunkfs.FileInfo, error) {
	ctx = reqid.Ensure(ctx)
	path, err := checkPath("stat", path)
	if err != nil {
		return nil, err
	}
	fi, err := c.statCall(ctx, path)
	if err != nil {
		return nil, wrapOp("stat", path, err)
	}
	return fi, nil
}

// ReadDir lists directory path, sorted by name.
func (c *Client) ReadDir(ctx context.Context, path string) ([]fs.DirEntry, error) {
	ctx = reqid.Ensure(ctx)
	infos, err := c.readDir(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, len(infos))
	for i, fi := range infos {
		out[i] = fi
	}
	return out, nil
}

// readDir lists a directory page by page.
func (c *Client) readDir(ctx context.Context, path string) ([]*chunkfs.FileInfo, error) {
	path, err := checkPath("readdir", path)
	if err != nil {
		return nil, err
	}
	var out []*chunkfs.FileInfo
	for after := ""; ; {
		page, more, err := c.listPage(ctx, path, after)
		if err != nil {
			return nil, wrapOp("readdir", path, err)
		}
		out = append(out, page...)
		if !more || len(page) == 0 {
			return out, nil
		}
		after = page[len(page)-1].FileName
	}
}

// Remove removes the file or empty directory path.
//
// While the master keeps a trash (master --trash-period above 0), Remove
// and RemoveAll move what they remove to it, from which Undelete brings it
// back until the period passes; RemoveNow deletes at once.
func (c *Client) Remove(ctx context.Context, path string) error {
	_, err := c.RemoveParent(ctx, path)
	return err
}

// RemoveParent is Remove that also returns the attributes of path's
// parent directory just after, as the master saw them (nil when it did
// not say): the FUSE mount answers the kernel's next look at the
// directory with them.
func (c *Client) RemoveParent(ctx context.Context, path string) (*chunkfs.FileInfo, error) {
	ctx = reqid.Ensure(ctx)
	return c.delete(ctx, "remove", path, false, false)
}

// RemoveNow is Remove, or RemoveAll when recursive, without the trash:
// what it removes is gone at once and its chunks are reclaimed.
func (c *Client) RemoveNow(ctx context.Context, path string, recursive bool) error {
	ctx = reqid.Ensure(ctx)
	return c.remove(ctx, "remove", path, recursive, true)
}

// RemoveAll removes path and everything under it. A path that does not
// exist is not an error, as with os.RemoveAll.
func (c *Client) RemoveAll(ctx context.Context, path string) error {
	ctx = reqid.Ensure(ctx)
	err := c.remove(ctx, "removeall", path, true, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (c *Client) remove(ctx context.Context, op, path string, recursive, skipTrash bool) error {
	_, err := c.delete(ctx, op, path, recursive, skipTrash)
	return err
}

// delete removes path and returns its parent's attributes just after (nil
// when the master did not say).
func (c *Client) delete(ctx context.Context, op, path string, recursive, skipTrash bool) (*chunkfs.FileInfo, error) {
	path, err := checkPath(op, path)
	if err != nil {
		return nil, err
	}
	if path == "/" {
		return nil, chunkfs.E(op, path, chunkfs.KindInvalid, "cannot remove the root directory")
	}
	parent, err := c.deleteCall(ctx, path, recursive, skipTrash)
	if err != nil {
		return nil, wrapOp(op, path, err)
	}
	c.locs.dropPrefix(path)
	c.leases.dropPath(path)
	return parent, nil
}

// Rename moves oldpath to newpath, replacing a file at newpath.
func (c *Client) Rename(ctx context.Context, oldpath, newpath string) error {
	ctx = reqid.Ensure(ctx)
	oldpath, newpath, err := checkPaths("rename", oldpath, newpath)
	if err != nil {
		return err
	}
	if err := c.renameCall(ctx, oldpath, newpath, renameFlags{}); err != nil {
		return wrapOp("rename", oldpath, err)
	}
	c.locs.dropPrefix(oldpath)
	c.locs.dropPrefix(newpath)
	c.leases.dropPath(oldpath)
	c.leases.dropPath(newpath)
	return nil
}

// Link gives the file at oldpath the further name newpath, as os.Link and
// link(2) do: both names are one file (one inode, its data and
// attributes), which lives until its last name is removed. oldpath may be
// any type but a directory (a symbolic link is linked, not followed);
// newpath must not exist, and the caller needs write and search
// permission on its directory. The error wraps fs.ErrExist,
// fs.ErrNotExist or fs.ErrPermission (a directory) as link(2) would fail.
func (c *Client) Link(ctx context.Context, oldpath, newpath string) error {
	oldpath, newpath, err := checkPaths("link", oldpath, newpath)
	if err != nil {
		return err
	}
	if err := c.linkCall(ctx, oldpath, newpath); err != nil {
		return wrapOp("link", oldpath, err)
	}
	c.Forget(newpath)
	return nil
}

// Chmod sets the permission bits of path.
func (c *Client) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	ctx = reqid.Ensure(ctx)
	m := uint32(mode & modeBits)
	_, err := c.setAttr(ctx, "chmod", path, attrChange{mode: &m})
	return err
}

// Chown sets the owner and group of path. A negative uid or gid leaves that
// one unchanged, as with os.Chown.
func (c *Client) Chown(ctx context.Context, path string, uid, gid int) error {
	ctx = reqid.Ensure(ctx)
	var req attrChange
	if uid >= 0 {
		u := uint32(uid)
		req.uid = &u
	}
	if gid >= 0 {
		g := uint32(gid)
		req.gid = &g
	}
	_, err := c.setAttr(ctx, "chown", path, req)
	return err
}

// Chtimes sets the access and modification times of path. A zero time
// leaves that one unchanged.
func (c *Client) Chtimes(ctx context.Context, path string, atime, mtime time.Time) error {
	ctx = reqid.Ensure(ctx)
	var req attrChange
	if !atime.IsZero() {
		a := atime.UnixNano()
		req.atime = &a
	}
	if !mtime.IsZero() {
		m := mtime.UnixNano()
		req.mtime = &m
	}
	_, err := c.setAttr(ctx, "chtimes", path, req)
	return err
}

// Touch sets the access and modification times of path to now by the
// master's clock, as touch(1) (utimensat's UTIME_NOW): the owner or a
// caller with write permission may, where Chtimes, which sets times of
// the caller's choosing, needs the owner.
func (c *Client) Touch(ctx context.Context, path string) error {
	ctx = reqid.Ensure(ctx)
	now := time.Now().UnixNano()
	_, err := c.setAttr(ctx, "touch", path, attrChange{atime: &now, mtime: &now, timesNow: true})
	return err
}

// SetReplication sets how many replicas the chunks of file path keep.
func (c *Client) SetReplication(ctx context.Context, path string, n int) error {
	ctx = reqid.Ensure(ctx)
	if n < 1 || n > chunkfs.MaxReplication {
		return chunkfs.E("setreplication", path, chunkfs.KindInvalid, "replication must be between 1 and 16")
	}
	r := uint32(n)
	_, err := c.setAttr(ctx, "setreplication", path, attrChange{replication: &r})
	return err
}

// Truncate sets the length of file path; growing it leaves a hole that
// reads as zeros.
func (c *Client) Truncate(ctx context.Context, path string, size int64) error {
	ctx = reqid.Ensure(ctx)
	if size < 0 {
		return chunkfs.E("truncate", path, chunkfs.KindInvalid, "negative size")
	}
	path, err := checkPath("truncate", path)
	if err != nil {
		return err
	}
	_, err = c.setAttr(ctx, "truncate", path, attrChange{length: &size})
	if err == nil {
		c.locs.drop(path)
		c.leases.dropPath(path)
	}
	return err
}

func (c *Client) setAttr(ctx context.Context, op, path string, a attrChange) (*chunkfs.FileInfo, error) {
	path, err := checkPath(op, path)
	if err != nil {
		return nil, err
	}
	fi, err := c.setAttrCall(ctx, path, a)
	if err != nil {
		return nil, wrapOp(op, path, err)
	}
	return fi, nil
}

// Symlink makes newname a symbolic link to target.
func (c *Client) Symlink(ctx context.Context, target, newname string) error {
	_, _, err := c.SymlinkParent(ctx, target, newname)
	return err
}

// SymlinkParent is Symlink that also returns the link's attributes and
// those of its parent directory just after, as the master saw them
// (parent is nil when it did not say), as MkdirParent does.
func (c *Client) SymlinkParent(ctx context.Context, target, newname string) (fi, parent *chunkfs.FileInfo, err error) {
	ctx = reqid.Ensure(ctx)
	newname, err = checkPath("symlink", newname)
	if err != nil {
		return nil, nil, err
	}
	if target == "" || len(target) > chunkfs.MaxSymlinkLen {
		return nil, nil, chunkfs.E("symlink", newname, chunkfs.KindInvalid, "symlink target must be 1 to 4096 bytes")
	}
	fi, parent, err = c.createCall(ctx, createSpec{path: newname, mode: 0o777, exclusive: true, symlinkTarget: target})
	if err != nil {
		return nil, nil, wrapOp("symlink", newname, err)
	}
	return fi, parent, nil
}

// Readlink returns the target of symbolic link path.
func (c *Client) Readlink(ctx context.Context, path string) (string, error) {
	ctx = reqid.Ensure(ctx)
	fi, err := c.Stat(ctx, path)
	if err != nil {
		return "", err
	}
	if fi.FileMode&fs.ModeSymlink == 0 {
		return "", chunkfs.E("readlink", path, chunkfs.KindInvalid, "not a symbolic link")
	}
	return fi.Target, nil
}
