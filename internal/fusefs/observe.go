package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
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

func (o *observed) Mkdir(ctx context.Context, c chunkfs.Caller, path string, perm fs.FileMode) (fi, parent *chunkfs.FileInfo, err error) {
	defer o.since("mkdir", time.Now())
	return o.b.Mkdir(ctx, c, path, perm)
}

func (o *observed) Create(ctx context.Context, c chunkfs.Caller, path string, perm fs.FileMode, exclusive, truncate bool, at time.Time) (File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	defer o.since("create", time.Now())
	f, fi, parent, err := o.b.Create(ctx, c, path, perm, exclusive, truncate, at)
	return o.file(f), fi, parent, err
}

func (o *observed) Open(ctx context.Context, c chunkfs.Caller, path string, write bool) (File, *chunkfs.FileInfo, error) {
	defer o.since("open", time.Now())
	f, fi, err := o.b.Open(ctx, c, path, write)
	return o.file(f), fi, err
}

func (o *observed) Remove(ctx context.Context, c chunkfs.Caller, path string) (*chunkfs.FileInfo, error) {
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

func (o *observed) Symlink(ctx context.Context, c chunkfs.Caller, target, path string) (fi, parent *chunkfs.FileInfo, err error) {
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

// OpObserver is told of every FUSE operation the mount answered, by the
// kernel's name for it ("lookup", "getattr", "open", "read", "write",
// "flush", "fsync", "release", ...), with the errno it was answered with
// (0: success) and how long the mount took, caches included. It is called
// on the operation's goroutine and must not block.
type OpObserver func(op string, errno syscall.Errno, elapsed time.Duration)

// mountFS is go-fuse's fs.Mount of root, with every operation of the raw
// file system told to ops (nil: none).
func mountFS(dir string, root gofs.InodeEmbedder, opts *gofs.Options, ops OpObserver) (*fuse.Server, error) {
	raw := gofs.NewNodeFS(root, opts)
	if ops != nil {
		raw = &observedRaw{fs: raw, obs: ops}
	}
	srv, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := waitReady(srv); err != nil {
		// The kernel has the mount already: take it down rather than
		// leave behind a mount point nobody serves.
		if uerr := srv.Unmount(); uerr != nil {
			if lerr := Unmount(dir, true); lerr != nil {
				return nil, fmt.Errorf("mount not ready: %w (and left mounted: %v)", err, lerr)
			}
		}
		return nil, fmt.Errorf("mount not ready: %w", err)
	}
	return srv, nil
}

// probe is go-fuse's readiness check of a new mount: it opens a file of
// the mount, which the kernel serves once the mount is up.
var probe = (*fuse.Server).WaitMount

// waitReady waits until the kernel serves srv. The probe's open can be
// interrupted by the Go runtime's own signals (EINTR), and is then made
// again.
func waitReady(srv *fuse.Server) error {
	for i := 0; ; i++ {
		err := probe(srv)
		if !errors.Is(err, syscall.EINTR) || i == 9 {
			return err
		}
	}
}

// observedRaw times every operation of a raw file system for obs. It
// implements each method itself, embedding nothing, so an operation go-fuse
// adds cannot pass by untimed: the package would not compile.
type observedRaw struct {
	fs  fuse.RawFileSystem
	obs OpObserver
}

// done reports the operation op that started at start and was answered
// with *st.
func (o *observedRaw) done(op string, start time.Time, st *fuse.Status) {
	var errno syscall.Errno
	if *st > 0 {
		errno = syscall.Errno(*st)
	}
	o.obs(op, errno, time.Since(start))
}

func (o *observedRaw) String() string      { return o.fs.String() }
func (o *observedRaw) SetDebug(debug bool) { o.fs.SetDebug(debug) }
func (o *observedRaw) Init(s *fuse.Server) { o.fs.Init(s) }
func (o *observedRaw) OnUnmount()          { o.fs.OnUnmount() }

func (o *observedRaw) Forget(nodeid, nlookup uint64) {
	start := time.Now()
	o.fs.Forget(nodeid, nlookup)
	o.obs("forget", 0, time.Since(start))
}

func (o *observedRaw) Release(cancel <-chan struct{}, input *fuse.ReleaseIn) {
	start := time.Now()
	o.fs.Release(cancel, input)
	o.obs("release", 0, time.Since(start))
}

func (o *observedRaw) ReleaseDir(input *fuse.ReleaseIn) {
	start := time.Now()
	o.fs.ReleaseDir(input)
	o.obs("releasedir", 0, time.Since(start))
}

// Writev is how go-fuse asks for a WRITE first; on ENOSYS it calls Write,
// which is then the one reported.
func (o *observedRaw) Writev(cancel <-chan struct{}, input *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := o.fs.Writev(cancel, input, data)
	if st != fuse.ENOSYS {
		o.done("write", start, &st)
	}
	return n, st
}

// Lookup reports a negative entry (a name that does not exist, answered
// OK with node ID 0 so that the kernel may cache it) as ENOENT, which is
// what the program that looked it up gets.
func (o *observedRaw) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	st := o.fs.Lookup(cancel, header, name, out)
	seen := st
	if st == fuse.OK && out != nil && out.NodeId == 0 {
		seen = fuse.ENOENT
	}
	o.done("lookup", start, &seen)
	return st
}

func (o *observedRaw) GetAttr(cancel <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) (code fuse.Status) {
	defer o.done("getattr", time.Now(), &code)
	return o.fs.GetAttr(cancel, input, out)
}

func (o *observedRaw) SetAttr(cancel <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) (code fuse.Status) {
	defer o.done("setattr", time.Now(), &code)
	return o.fs.SetAttr(cancel, input, out)
}

func (o *observedRaw) Mknod(cancel <-chan struct{}, input *fuse.MknodIn, name string, out *fuse.EntryOut) (code fuse.Status) {
	defer o.done("mknod", time.Now(), &code)
	return o.fs.Mknod(cancel, input, name, out)
}

func (o *observedRaw) Mkdir(cancel <-chan struct{}, input *fuse.MkdirIn, name string, out *fuse.EntryOut) (code fuse.Status) {
	defer o.done("mkdir", time.Now(), &code)
	return o.fs.Mkdir(cancel, input, name, out)
}

func (o *observedRaw) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) (code fuse.Status) {
	defer o.done("unlink", time.Now(), &code)
	return o.fs.Unlink(cancel, header, name)
}

func (o *observedRaw) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) (code fuse.Status) {
	defer o.done("rmdir", time.Now(), &code)
	return o.fs.Rmdir(cancel, header, name)
}

func (o *observedRaw) Rename(cancel <-chan struct{}, input *fuse.RenameIn, oldName string, newName string) (code fuse.Status) {
	defer o.done("rename", time.Now(), &code)
	return o.fs.Rename(cancel, input, oldName, newName)
}

func (o *observedRaw) Link(cancel <-chan struct{}, input *fuse.LinkIn, filename string, out *fuse.EntryOut) (code fuse.Status) {
	defer o.done("link", time.Now(), &code)
	return o.fs.Link(cancel, input, filename, out)
}

func (o *observedRaw) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) (code fuse.Status) {
	defer o.done("symlink", time.Now(), &code)
	return o.fs.Symlink(cancel, header, pointedTo, linkName, out)
}

func (o *observedRaw) Readlink(cancel <-chan struct{}, header *fuse.InHeader) (out []byte, code fuse.Status) {
	defer o.done("readlink", time.Now(), &code)
	return o.fs.Readlink(cancel, header)
}

func (o *observedRaw) Access(cancel <-chan struct{}, input *fuse.AccessIn) (code fuse.Status) {
	defer o.done("access", time.Now(), &code)
	return o.fs.Access(cancel, input)
}

func (o *observedRaw) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (sz uint32, code fuse.Status) {
	defer o.done("getxattr", time.Now(), &code)
	return o.fs.GetXAttr(cancel, header, attr, dest)
}

func (o *observedRaw) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (sz uint32, code fuse.Status) {
	defer o.done("listxattr", time.Now(), &code)
	return o.fs.ListXAttr(cancel, header, dest)
}

func (o *observedRaw) SetXAttr(cancel <-chan struct{}, input *fuse.SetXAttrIn, attr string, data []byte) (code fuse.Status) {
	defer o.done("setxattr", time.Now(), &code)
	return o.fs.SetXAttr(cancel, input, attr, data)
}

func (o *observedRaw) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) (code fuse.Status) {
	defer o.done("removexattr", time.Now(), &code)
	return o.fs.RemoveXAttr(cancel, header, attr)
}

func (o *observedRaw) Create(cancel <-chan struct{}, input *fuse.CreateIn, name string, out *fuse.CreateOut) (code fuse.Status) {
	defer o.done("create", time.Now(), &code)
	return o.fs.Create(cancel, input, name, out)
}

func (o *observedRaw) Tmpfile(cancel <-chan struct{}, input *fuse.CreateIn, out *fuse.CreateOut) (code fuse.Status) {
	defer o.done("tmpfile", time.Now(), &code)
	return o.fs.Tmpfile(cancel, input, out)
}

func (o *observedRaw) Open(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) (status fuse.Status) {
	defer o.done("open", time.Now(), &status)
	return o.fs.Open(cancel, input, out)
}

func (o *observedRaw) Read(cancel <-chan struct{}, input *fuse.ReadIn, buf []byte) (res fuse.ReadResult, code fuse.Status) {
	defer o.done("read", time.Now(), &code)
	return o.fs.Read(cancel, input, buf)
}

func (o *observedRaw) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) (code fuse.Status) {
	defer o.done("lseek", time.Now(), &code)
	return o.fs.Lseek(cancel, in, out)
}

func (o *observedRaw) GetLk(cancel <-chan struct{}, input *fuse.LkIn, out *fuse.LkOut) (code fuse.Status) {
	defer o.done("getlk", time.Now(), &code)
	return o.fs.GetLk(cancel, input, out)
}

func (o *observedRaw) SetLk(cancel <-chan struct{}, input *fuse.LkIn) (code fuse.Status) {
	defer o.done("setlk", time.Now(), &code)
	return o.fs.SetLk(cancel, input)
}

func (o *observedRaw) SetLkw(cancel <-chan struct{}, input *fuse.LkIn) (code fuse.Status) {
	defer o.done("setlkw", time.Now(), &code)
	return o.fs.SetLkw(cancel, input)
}

func (o *observedRaw) Write(cancel <-chan struct{}, input *fuse.WriteIn, data []byte) (written uint32, code fuse.Status) {
	defer o.done("write", time.Now(), &code)
	return o.fs.Write(cancel, input, data)
}

func (o *observedRaw) CopyFileRange(cancel <-chan struct{}, input *fuse.CopyFileRangeIn) (written uint32, code fuse.Status) {
	defer o.done("copy_file_range", time.Now(), &code)
	return o.fs.CopyFileRange(cancel, input)
}

func (o *observedRaw) Ioctl(cancel <-chan struct{}, input *fuse.IoctlIn, inbuf []byte, output *fuse.IoctlOut, outbuf []byte) (code fuse.Status) {
	defer o.done("ioctl", time.Now(), &code)
	return o.fs.Ioctl(cancel, input, inbuf, output, outbuf)
}

func (o *observedRaw) Flush(cancel <-chan struct{}, input *fuse.FlushIn) (code fuse.Status) {
	defer o.done("flush", time.Now(), &code)
	return o.fs.Flush(cancel, input)
}

func (o *observedRaw) Fsync(cancel <-chan struct{}, input *fuse.FsyncIn) (code fuse.Status) {
	defer o.done("fsync", time.Now(), &code)
	return o.fs.Fsync(cancel, input)
}

func (o *observedRaw) Fallocate(cancel <-chan struct{}, input *fuse.FallocateIn) (code fuse.Status) {
	defer o.done("fallocate", time.Now(), &code)
	return o.fs.Fallocate(cancel, input)
}

func (o *observedRaw) OpenDir(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) (status fuse.Status) {
	defer o.done("opendir", time.Now(), &status)
	return o.fs.OpenDir(cancel, input, out)
}

func (o *observedRaw) ReadDir(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) (code fuse.Status) {
	defer o.done("readdir", time.Now(), &code)
	return o.fs.ReadDir(cancel, input, out)
}

func (o *observedRaw) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) (code fuse.Status) {
	defer o.done("readdirplus", time.Now(), &code)
	return o.fs.ReadDirPlus(cancel, input, out)
}

func (o *observedRaw) FsyncDir(cancel <-chan struct{}, input *fuse.FsyncIn) (code fuse.Status) {
	defer o.done("fsyncdir", time.Now(), &code)
	return o.fs.FsyncDir(cancel, input)
}

func (o *observedRaw) StatFs(cancel <-chan struct{}, input *fuse.InHeader, out *fuse.StatfsOut) (code fuse.Status) {
	defer o.done("statfs", time.Now(), &code)
	return o.fs.StatFs(cancel, input, out)
}

func (o *observedRaw) Statx(cancel <-chan struct{}, input *fuse.StatxIn, out *fuse.StatxOut) (code fuse.Status) {
	defer o.done("statx", time.Now(), &code)
	return o.fs.Statx(cancel, input, out)
}
