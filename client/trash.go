package client

import (
	"context"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TrashEntry is a deleted file or tree the master keeps until Expires.
type TrashEntry struct {
	ID          uint64            `json:"id"`
	Path        string            `json:"path"` // where it was deleted from
	Deleted     time.Time         `json:"deleted"`
	Expires     time.Time         `json:"expires"`    // when the master purges it
	DeletedBy   uint32            `json:"deleted_by"` // the deleter's UID
	Info        *chunkfs.FileInfo `json:"info"`       // what it is; a directory: the tree's root
	Files       int64             `json:"files"`
	Directories int64             `json:"directories"`
	Chunks      int64             `json:"chunks"`
	Bytes       int64             `json:"bytes"`
}

// maxTrashPages bounds the pages Trash reads (a million entries).
const maxTrashPages = 1000

// Trash lists the trash entries the caller may see (those it deleted or
// owns; every one for the superuser), oldest first, and the master's grace
// period.
func (c *Client) Trash(ctx context.Context) ([]TrashEntry, time.Duration, error) {
	ctx = reqid.Ensure(ctx)
	var out []TrashEntry
	var period time.Duration
	var after uint64
	for range maxTrashPages {
		resp, err := c.mc.TrashList(ctx, &pb.TrashListRequest{Caller: c.caller, After: after})
		if err != nil {
			return nil, 0, wrapOp("trash", "", err)
		}
		c.observe(resp.StateId)
		period = time.Duration(resp.PeriodNs)
		for _, e := range resp.Entries {
			out = append(out, trashEntry(e))
			after = e.Id
		}
		if !resp.More || len(resp.Entries) == 0 {
			return out, period, nil
		}
	}
	return out, period, chunkfs.E("trash", "", chunkfs.KindTooLarge, "trash listing longer than a million entries")
}

func trashEntry(e *pb.TrashEntry) TrashEntry {
	return TrashEntry{ID: e.Id, Path: e.Path, Deleted: time.Unix(0, e.DeletedNs), Expires: time.Unix(0, e.ExpiresNs),
		DeletedBy: e.DeletedBy, Info: rpc.FileInfoOf(e.Info), Files: e.Files, Directories: e.Directories,
		Chunks: e.Chunks, Bytes: e.Bytes}
}

// UndeleteOptions say which trash entry to bring back and where.
type UndeleteOptions struct {
	ID      uint64 // the entry; 0: the newest deleted from the path that the caller may undelete
	To      string // where; empty: where it was deleted from
	Parents bool   // make the destination's missing parents
}

// Undelete brings back what was deleted from path (or the entry o.ID),
// at path or o.To. It fails with KindExist when the name is taken,
// KindNotExist when the parent is gone (unless o.Parents) or nothing
// is in the trash under that name, and changes nothing then.
func (c *Client) Undelete(ctx context.Context, path string, o UndeleteOptions) (*chunkfs.FileInfo, error) {
	ctx = reqid.Ensure(ctx)
	if path != "" || o.ID == 0 {
		p, err := checkPath("undelete", path)
		if err != nil {
			return nil, err
		}
		path = p
	}
	if o.To != "" {
		to, err := checkPath("undelete", o.To)
		if err != nil {
			return nil, err
		}
		o.To = to
	}
	resp, err := c.mc.Undelete(ctx, &pb.UndeleteRequest{Caller: c.caller, Path: path, Id: o.ID, To: o.To, Parents: o.Parents})
	if err != nil {
		return nil, wrapOp("undelete", path, err)
	}
	c.observe(resp.StateId)
	return rpc.FileInfoOf(resp.Info), nil
}

// PurgeTrash frees trash entry id now, with its chunks.
func (c *Client) PurgeTrash(ctx context.Context, id uint64) error {
	ctx = reqid.Ensure(ctx)
	resp, err := c.mc.PurgeTrash(ctx, &pb.PurgeTrashRequest{Caller: c.caller, Id: id})
	if err != nil {
		return wrapOp("purge trash", "", err)
	}
	c.observe(resp.StateId)
	return nil
}
