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

// dots is how many entries come before the listing: "." and "..".
const dots = 2

// Readdirent returns the next entry: ".", "..", then the listing.
// Offsets are positions in that sequence.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if d.pos >= dots+len(d.entries) {
		return nil, 0
	}
	d.pos++
	if d.pos <= dots {
		return d.dot(d.pos), 0
	}
	fi := d.entries[d.pos-dots-1]
	return &fuse.DirEntry{
		Name: fi.FileName,
		Ino:  fi.Inode,
		Mode: unixMode(fi.FileMode),
		Off:  uint64(d.pos),
	}, 0
}

// dot returns "." (pos 1) or ".." (pos 2); the root is its own parent.
func (d *dirHandle) dot(pos int) *fuse.DirEntry {
	e := &fuse.DirEntry{Name: ".", Ino: d.n.StableAttr().Ino, Mode: syscall.S_IFDIR, Off: uint64(pos)}
	if pos == 2 {
		e.Name = ".."
		if _, p := d.n.Parent(); p != nil {
			e.Ino = p.StableAttr().Ino
		}
	}
	return e
}

var _ = (gofs.FileSeekdirer)((*dirHandle)(nil))

// Seekdir moves to a position; seeking to 0 (rewinddir) lists afresh.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		return d.load(ctx)
	}
	if off > uint64(dots+len(d.entries)) {
		return syscall.EINVAL
	}
	d.pos = int(off)
	return 0
}

var _ = (gofs.FileLookuper)((*dirHandle)(nil))

// Lookup answers READDIRPLUS from the listing: name is always the entry
// Readdirent returned last (go-fuse looks up neither "." nor "..").
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if d.pos <= dots || d.entries[d.pos-dots-1].FileName != name {
		return d.n.Lookup(ctx, name, out)
	}
	fi := *d.entries[d.pos-dots-1]
	return d.n.entry(ctx, &fi, out), 0
}

var _ = (gofs.FileReleasedirer)((*dirHandle)(nil))

// Releasedir drops the listing.
func (d *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) { d.entries = nil }

var _ = (gofs.FileFsyncdirer)((*dirHandle)(nil))

// Fsyncdir waits for the asynchronous creates in the directory
// (asynccreate.go); every other namespace change is already logged by the
// master before it answers.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	cctx, cancel := d.n.m.call(ctx)
	defer cancel()
	return errno(d.n.m.creates.settle(cctx, d.n.path()))
}
