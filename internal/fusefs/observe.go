package fusefs

import (
	"context"
	"io/fs"
	"time"

	"github.com/chunkfs/chunkfs"
)

// Observer is told how long each call of the mount to its backend took,
// by call name ("stat", "read", "write", ...): the cluster's part of the
// latency of the FUSE operations that need it (those the kernel or the
// mount's caches answer make no call). It must not block.
type Observer func(op string, elapsed time.Duration)

// Observed returns b with its calls, and the calls of the files it opens,
// timed for obs (metrics). Calls it does not name pass through untimed.
func Observed(b Backend, obs Observer) Backend { return &observed{Backend: b, b: b, obs: obs} }

type observed struct {
	Backend // calls not timed below
	b       Backend
	obs     Observer
}

func (o *observed) since(op string, start time.Time) { o.obs(op, time.Since(start)) }

func (o *observed) Stat(ctx context.Context, c chunkfs.Caller, path string) (*chunkfs.FileInfo, error) {
	defer o.since("stat", time.Now())
	return o.b.Stat(ctx, c, path)
}

func (o *observed) ReadDir(ctx context.Context, c chunkfs.Caller, path string) ([]*chunkfs.FileInfo, error) {
	defer o.since("readdir", time.Now())
	return o.b.ReadDir(ctx, c, path)
}

func (o *observed) Mkdir(ctx context.Context, c chunkfs.Caller, path string, perm fs.FileMode) (*chunkfs.FileInfo, error) {
	defer o.since("mkdir", time.Now())
	return o.b.Mkdir(ctx, c, path, perm)
}

func (o *observed) Create(ctx context.Context, c chunkfs.Caller, path string, perm fs.FileMode, exclusive, truncate bool) (File, *chunkfs.FileInfo, error) {
	defer o.since("create", time.Now())
	f, fi, err := o.b.Create(ctx, c, path, perm, exclusive, truncate)
	return o.file(f), fi, err
}

func (o *observed) Open(ctx context.Context, c chunkfs.Caller, path string, write bool) (File, *chunkfs.FileInfo, error) {
	defer o.since("open", time.Now())
	f, fi, err := o.b.Open(ctx, c, path, write)
	return o.file(f), fi, err
}

func (o *observed) Remove(ctx context.Context, c chunkfs.Caller, path string) error {
	defer o.since("remove", time.Now())
	return o.b.Remove(ctx, c, path)
}

func (o *observed) Rename(ctx context.Context, c chunkfs.Caller, src, dst string, how RenameHow) error {
	defer o.since("rename", time.Now())
	return o.b.Rename(ctx, c, src, dst, how)
}

func (o *observed) SetAttr(ctx context.Context, c chunkfs.Caller, path string, a SetAttr) (*chunkfs.FileInfo, error) {
	defer o.since("setattr", time.Now())
	return o.b.SetAttr(ctx, c, path, a)
}

func (o *observed) Mknod(ctx context.Context, c chunkfs.Caller, path string, mode fs.FileMode, dev uint32) (*chunkfs.FileInfo, error) {
	defer o.since("mknod", time.Now())
	return o.b.Mknod(ctx, c, path, mode, dev)
}

func (o *observed) Symlink(ctx context.Context, c chunkfs.Caller, target, path string) (*chunkfs.FileInfo, error) {
	defer o.since("symlink", time.Now())
	return o.b.Symlink(ctx, c, target, path)
}

func (o *observed) Readlink(ctx context.Context, c chunkfs.Caller, path string) (string, error) {
	defer o.since("readlink", time.Now())
	return o.b.Readlink(ctx, c, path)
}

func (o *observed) Usage(ctx context.Context) (Usage, error) {
	defer o.since("statfs", time.Now())
	return o.b.Usage(ctx)
}

func (o *observed) file(f File) File {
	if f == nil {
		return nil
	}
	return &observedFile{File: f, f: f, o: o}
}

// observedFile times the calls of an open file.
type observedFile struct {
	File // calls not timed below
	f    File
	o    *observed
}

func (f *observedFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	defer f.o.since("read", time.Now())
	return f.f.ReadAt(ctx, p, off)
}

func (f *observedFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	defer f.o.since("write", time.Now())
	return f.f.WriteAt(ctx, p, off)
}

func (f *observedFile) Sync(ctx context.Context) error {
	defer f.o.since("fsync", time.Now())
	return f.f.Sync(ctx)
}

func (f *observedFile) Close() error {
	defer f.o.since("release", time.Now())
	return f.f.Close()
}
