package fusefs

import (
	"context"
	"syscall"

	"github.com/chunkfs/chunkfs"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirHandle is an open directory: one listing, with every entry's
// attributes, read from the cluster at open and at rewind. READDIRPLUS
// answers its lookups from the listing, so `ls -l` costs one round trip
// per listing instead of one per file (stat-prefetch).
type dirHandle struct {
	n       *node
	entries []*chunkfs.FileInfo
	pos     int // index of the next entry to return
}

var _ = (gofs.NodeOpendirHandler)((*node)(nil))

// OpendirHandle lists the directory.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	d := &dirHandle{n: n}
	if e := d.load(ctx); e != 0 {
		return nil, 0, e
	}
	return d, 0, 0
}

func (d *dirHandle) load(ctx context.Context) syscall.Errno {
	cctx, cancel := d.n.m.call(ctx)
	defer cancel()
	es, err := d.n.m.b.ReadDir(cctx, callerOf(ctx), d.n.path())
	if err != nil {
		return errno(err)
	}
	d.entries, d.pos = es, 0
	return 0
}

var _ = (gofs.FileReaddirenter)((*dirHandle)(nil))

// Readdirent returns the next entry; offsets are positions in the listing.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if d.pos >= len(d.entries) {
		return nil, 0
	}
	fi := d.entries[d.pos]
	d.pos++
	return &fuse.DirEntry{
		Name: fi.FileName,
		Ino:  fi.Inode,
		Mode: unixMode(fi.FileMode),
		Off:  uint64(d.pos),
	}, 0
}

var _ = (gofs.FileSeekdirer)((*dirHandle)(nil))

// Seekdir moves to a position; seeking to 0 (rewinddir) lists afresh.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		return d.load(ctx)
	}
	if off > uint64(len(d.entries)) {
		return syscall.EINVAL
	}
	d.pos = int(off)
	return 0
}

var _ = (gofs.FileLookuper)((*dirHandle)(nil))

// Lookup answers READDIRPLUS from the listing: name is always the entry
// Readdirent returned last.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if d.pos == 0 || d.entries[d.pos-1].FileName != name {
		return d.n.Lookup(ctx, name, out)
	}
	fi := *d.entries[d.pos-1]
	return d.n.entry(ctx, &fi, out), 0
}

var _ = (gofs.FileReleasedirer)((*dirHandle)(nil))

// Releasedir drops the listing.
func (d *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) { d.entries = nil }

var _ = (gofs.FileFsyncdirer)((*dirHandle)(nil))

// Fsyncdir succeeds: every namespace change is already logged by the
// master before it answers.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno { return 0 }
