package client

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// The master's namespace calls on the wire: each sends its request as the
// client's caller, adopts the answer's state ID, and returns the client's
// own types. The errors are the master's, unwrapped; callers name the op.

// createSpec is what a create asks of the master.
type createSpec struct {
	path          string
	mode          uint32 // type and permission bits
	replication   uint32 // 0: the cluster default
	exclusive     bool   // O_EXCL
	truncate      bool   // O_TRUNC
	firstChunk    bool   // opened to write: chunk 0 comes with the create
	rdev          uint32 // a device node's number
	symlinkTarget string // non-empty: a symbolic link
	time          int64  // a new file's atime and mtime, Unix ns; 0: the master's clock
}

// attrChange is what a set-attributes call changes: nil fields stay.
type attrChange struct {
	mode, uid, gid *uint32
	atime, mtime   *int64
	timesNow       bool // the times given, by the master's clock
	replication    *uint32
	length         *int64
}

// renameFlags are rename(2)'s RENAME_NOREPLACE and RENAME_EXCHANGE.
type renameFlags struct{ noReplace, exchange bool }

// createCall creates as s says; it returns the file's attributes and its
// parent directory's just after (nil when the master did not say).
func (c *Client) createCall(ctx context.Context, s createSpec) (fi, parent *chunkfs.FileInfo, err error) {
	resp, err := c.master.Create(ctx, &pb.CreateRequest{Caller: c.caller, Path: s.path, Mode: s.mode,
		Replication: s.replication, Exclusive: s.exclusive, Truncate: s.truncate, FirstChunk: s.firstChunk,
		Rdev: s.rdev, SymlinkTarget: s.symlinkTarget, TimeNs: s.time})
	if err != nil {
		return nil, nil, err
	}
	c.observe(resp.StateId)
	if resp.Parent != nil {
		parent = rpc.FileInfoOf(resp.Parent)
	}
	return rpc.FileInfoOf(resp.Info), parent, nil
}

func (c *Client) mkdirCall(ctx context.Context, path string, mode uint32, parents bool) (fi, parent *chunkfs.FileInfo, err error) {
	resp, err := c.master.Mkdir(ctx, &pb.MkdirRequest{Caller: c.caller, Path: path, Mode: mode, Parents: parents})
	if err != nil {
		return nil, nil, err
	}
	c.observe(resp.StateId)
	if resp.Info != nil {
		fi = rpc.FileInfoOf(resp.Info)
	}
	if resp.Parent != nil {
		parent = rpc.FileInfoOf(resp.Parent)
	}
	return fi, parent, nil
}

func (c *Client) statCall(ctx context.Context, path string) (*chunkfs.FileInfo, error) {
	resp, err := c.master.Stat(ctx, &pb.StatRequest{Caller: c.caller, Path: path, MinStateId: c.readState(ctx)})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	return rpc.FileInfoOf(resp.Info), nil
}

// listPage is one page of directory path's entries after the name after,
// and whether more follow.
func (c *Client) listPage(ctx context.Context, path, after string) (entries []*chunkfs.FileInfo, more bool, err error) {
	resp, err := c.master.List(ctx, &pb.ListRequest{Caller: c.caller, Path: path, After: after, MinStateId: c.readState(ctx)})
	if err != nil {
		return nil, false, err
	}
	c.observe(resp.StateId)
	for _, e := range resp.Entries {
		entries = append(entries, rpc.FileInfoOf(e))
	}
	return entries, resp.More, nil
}

// deleteCall returns the attributes of path's parent just after, nil when
// the master did not say.
func (c *Client) deleteCall(ctx context.Context, path string, recursive, skipTrash bool) (*chunkfs.FileInfo, error) {
	resp, err := c.master.Delete(ctx, &pb.DeleteRequest{Caller: c.caller, Path: path, Recursive: recursive, SkipTrash: skipTrash})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	if resp.Parent == nil {
		return nil, nil
	}
	return rpc.FileInfoOf(resp.Parent), nil
}

func (c *Client) renameCall(ctx context.Context, src, dst string, f renameFlags) error {
	resp, err := c.master.Rename(ctx, &pb.RenameRequest{Caller: c.caller, Src: src, Dst: dst, NoReplace: f.noReplace, Exchange: f.exchange})
	if err != nil {
		return err
	}
	c.observe(resp.StateId)
	return nil
}

func (c *Client) linkCall(ctx context.Context, src, dst string) error {
	resp, err := c.mc.Link(ctx, &pb.LinkRequest{Caller: c.caller, Src: src, Dst: dst})
	if err != nil {
		return err
	}
	c.observe(resp.StateId)
	return nil
}

func (c *Client) setAttrCall(ctx context.Context, path string, a attrChange) (*chunkfs.FileInfo, error) {
	resp, err := c.master.SetAttr(ctx, &pb.SetAttrRequest{Caller: c.caller, Path: path, Mode: a.mode, Uid: a.uid, Gid: a.gid,
		AtimeNs: a.atime, MtimeNs: a.mtime, TimesNow: a.timesNow, Replication: a.replication, Length: a.length})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	return rpc.FileInfoOf(resp.Info), nil
}

// getXattrCall returns the attribute's value, empty rather than nil.
func (c *Client) getXattrCall(ctx context.Context, path, name string) ([]byte, error) {
	resp, err := c.master.GetXattr(ctx, &pb.GetXattrRequest{Caller: c.caller, Path: path, Name: name, MinStateId: c.readState(ctx)})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	if resp.Value == nil {
		return []byte{}, nil
	}
	return resp.Value, nil
}

func (c *Client) listXattrCall(ctx context.Context, path string) ([]string, error) {
	resp, err := c.master.ListXattr(ctx, &pb.ListXattrRequest{Caller: c.caller, Path: path, MinStateId: c.readState(ctx)})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	return resp.Names, nil
}

func (c *Client) setXattrCall(ctx context.Context, path, name string, value []byte, flags XattrFlags) error {
	resp, err := c.master.SetXattr(ctx, &pb.SetXattrRequest{Caller: c.caller, Path: path, Name: name, Value: value,
		Create: flags&XattrCreate != 0, Replace: flags&XattrReplace != 0})
	if err != nil {
		return err
	}
	c.observe(resp.StateId)
	return nil
}

func (c *Client) removeXattrCall(ctx context.Context, path, name string) error {
	resp, err := c.master.RemoveXattr(ctx, &pb.RemoveXattrRequest{Caller: c.caller, Path: path, Name: name})
	if err != nil {
		return err
	}
	c.observe(resp.StateId)
	return nil
}
