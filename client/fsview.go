package client

import (
	"context"
	"io"
	"io/fs"
	"path"

	"github.com/chunkfs/chunkfs"
)

// FS returns the io/fs view of the cluster: an fs.FS that also implements
// fs.StatFS and fs.ReadDirFS, with the cluster's root as ".". Every call
// through it uses ctx. Names follow fs.ValidPath ("a/b", never "/a/b"); use
// fs.Sub for a view rooted elsewhere.
func (c *Client) FS(ctx context.Context) *FS { return &FS{c: c, ctx: ctx} }

// FS is the io/fs view of a cluster, made by Client.FS.
type FS struct {
	c   *Client
	ctx context.Context
}

var (
	_ fs.FS        = (*FS)(nil)
	_ fs.StatFS    = (*FS)(nil)
	_ fs.ReadDirFS = (*FS)(nil)
)

// abs converts an fs.FS name to a chunkfs path.
func (v *FS) abs(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return path.Join("/", name), nil
}

// Open opens name for reading. A directory opens as an fs.ReadDirFile.
func (v *FS) Open(name string) (fs.File, error) {
	p, err := v.abs("open", name)
	if err != nil {
		return nil, err
	}
	f, err := v.c.Open(v.ctx, p)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if f.dir {
		return &dirFile{f: f, v: v, name: name}, nil
	}
	return &fsFile{f}, nil
}

// Stat returns the metadata of name.
func (v *FS) Stat(name string) (fs.FileInfo, error) {
	p, err := v.abs("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := v.c.Stat(v.ctx, p)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if name == "." {
		fi.FileName = "."
	}
	return fi, nil
}

// ReadDir lists directory name, sorted by name.
func (v *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := v.abs("readdir", name)
	if err != nil {
		return nil, err
	}
	ents, err := v.c.ReadDir(v.ctx, p)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return ents, nil
}

// fsFile is a regular file opened through FS.
type fsFile struct{ *File }

// Stat returns the file's metadata as an fs.FileInfo.
func (f fsFile) Stat() (fs.FileInfo, error) { return f.File.Stat() }

// dirFile is a directory opened through FS.
type dirFile struct {
	f       *File
	v       *FS
	name    string
	entries []fs.DirEntry // nil until the first ReadDir
	read    bool
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.v.Stat(d.name) }

func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: chunkfs.E("read", d.f.path, chunkfs.KindIsDir, "is a directory")}
}

func (d *dirFile) Close() error { return d.f.Close() }

// ReadDir returns the next n entries, or all remaining ones when n <= 0, as
// fs.ReadDirFile specifies.
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		ents, err := d.v.ReadDir(d.name)
		if err != nil {
			return nil, err
		}
		d.entries, d.read = ents, true
	}
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	k := min(n, len(d.entries))
	out := d.entries[:k]
	d.entries = d.entries[k:]
	return out, nil
}
