package client

import (
	"context"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
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
		page, p, more, err := c.trashPage(ctx, after)
		if err != nil {
			return nil, 0, wrapOp("trash", "", err)
		}
		period = p
		out = append(out, page...)
		if !more || len(page) == 0 {
			return out, period, nil
		}
		after = page[len(page)-1].ID
	}
	return out, period, chunkfs.E("trash", "", chunkfs.KindTooLarge, "trash listing longer than a million entries")
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
	info, err := c.undeleteCall(ctx, path, o)
	if err != nil {
		return nil, wrapOp("undelete", path, err)
	}
	return info, nil
}

// PurgeTrash frees trash entry id now, with its chunks.
func (c *Client) PurgeTrash(ctx context.Context, id uint64) error {
	ctx = reqid.Ensure(ctx)
	if err := c.purgeTrashCall(ctx, id); err != nil {
		return wrapOp("purge trash", "", err)
	}
	return nil
}
