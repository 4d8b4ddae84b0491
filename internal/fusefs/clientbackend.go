package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/locks"
)

// maxCallers bounds how many identities one mount acts as at once.
const maxCallers = 256

// ClientBackend is the Backend of a real cluster: the client library, one
// *client.Client per calling identity, since a client binds its caller
// when it is made. Files are opened with a context that outlives the FUSE
// request (the client keeps it for the file's I/O); the client's
// RetryTimeout bounds their calls instead.
//
// Access to a file is decided at open, as open(2) does: the caller's
// client creates the file or checks the caller's right against its mode,
// and the open file's I/O then goes through one client acting as the
// superuser (io), so that a descriptor keeps the right it was opened with
// whatever the file's mode says later (a file created 0444 is written
// through the descriptor that created it; see docs/architecture.md,
// "Access is decided at open"). Every change of what a path names made
// through a caller's client makes io forget its cached locations of it.
//
// A mount whose certificate is a plain user's (no proxy privilege) acts
// only as that user: requests of the certificate's UID act as its
// identity (its groups, not the process's), open files' I/O too, and
// every other local user, root included, is refused with EACCES, as an
// NFS client holding one user's Kerberos credentials refuses users who
// hold none. A proxy certificate, or plain TCP, acts as each caller.
type ClientBackend struct {
	cfg    client.Config
	io     *client.Client  // the I/O of every open file
	single *chunkfs.Caller // the one caller of a plain user certificate; nil: any
	// unsynced: a written file's Close leaves its replicas to sync it
	// (client.File.CloseUnsynced); set before the backend is used.
	unsynced bool

	mu      sync.Mutex // guards clients
	clients map[string]*client.Client
}

var _ Backend = (*ClientBackend)(nil)

// NewClientBackend connects to the cluster cfg names, as cfg.Caller, and
// fails if the master does not answer before ctx ends.
//
// The client's own write buffer only gathers one WriteAt of the mount
// into large writes: it is raised to at least 4 MiB. The client's umask
// is cleared: the kernel has applied the calling process's umask to every
// mode the mount passes on.
func NewClientBackend(ctx context.Context, cfg client.Config) (*ClientBackend, error) {
	cfg.WriteBuffer = max(cfg.WriteBuffer, 4<<20)
	cfg.Umask = 0
	b := &ClientBackend{cfg: cfg, clients: map[string]*client.Client{}}
	ioCaller := chunkfs.Root
	if sec := cfg.Security; !sec.IsInsecure() && !sec.Identity().Proxy {
		id := sec.Identity()
		b.single = &chunkfs.Caller{UID: id.UID, GIDs: slices.Clone(id.GIDs)}
		b.cfg.Caller, ioCaller = *b.single, *b.single
	}
	if _, err := b.clientFor(ctx, b.cfg.Caller); err != nil {
		return nil, err
	}
	io, err := b.clientFor(ctx, ioCaller)
	if err != nil {
		return nil, err
	}
	b.io = io
	return b, nil
}

// SyncOnClose says whether the close of a written file makes every replica
// sync it to disk (the default), or only pushes what is left (false:
// fsync(2) syncs, and the replicas write it out in their own time, as a
// local file system's close). It is set before the backend is mounted.
func (b *ClientBackend) SyncOnClose(sync bool) { b.unsynced = !sync }

// Close closes every client.
func (b *ClientBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for k, c := range b.clients {
		errs = append(errs, c.Close())
		delete(b.clients, k)
	}
	return errors.Join(errs...)
}

// client returns the client that acts as caller, making it if needed.
// The backend's clients share what they have seen: a caller's client
// adopts the I/O client's state ID before its call, and (calls defer
// b.seen) the I/O client adopts the caller's after it, so that every read
// through any of them, from observers too, sees every change this mount
// made.
func (b *ClientBackend) client(ctx context.Context, caller chunkfs.Caller) (*client.Client, error) {
	if b.single != nil {
		if caller.UID != b.single.UID && !ownRequest(ctx) {
			return nil, chunkfs.E("mount", "", chunkfs.KindPermission,
				fmt.Sprintf("permission denied: this mount's certificate acts only as uid %d, not uid %d", b.single.UID, caller.UID))
		}
		caller = *b.single
	}
	c, err := b.clientFor(ctx, caller)
	if err == nil && b.io != nil {
		c.Observe(b.io.StateID())
	}
	return c, err
}

// ownRequest reports whether ctx is a call of the mount process itself —
// not a FUSE request, or one a thread of this process made (go-fuse's
// check that the mount is up) — which acts as the mount's certificate:
// the process holds its key.
func ownRequest(ctx context.Context) bool {
	fc, ok := fuse.FromContext(ctx)
	if !ok {
		return true
	}
	if int(fc.Pid) == os.Getpid() {
		return true
	}
	_, err := os.Stat("/proc/self/task/" + strconv.FormatUint(uint64(fc.Pid), 10))
	return fc.Pid != 0 && err == nil
}

// seen passes what c has seen on to the I/O client.
func (b *ClientBackend) seen(c *client.Client) {
	if c != nil {
		b.io.Observe(c.StateID())
	}
}

// clientFor returns the client that acts as caller, making it if needed.
func (b *ClientBackend) clientFor(ctx context.Context, caller chunkfs.Caller) (*client.Client, error) {
	key := callerKey(caller)
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.clients[key]; ok {
		return c, nil
	}
	if len(b.clients) >= maxCallers {
		return nil, chunkfs.E("mount", "", chunkfs.KindUnavailable, fmt.Sprintf("more than %d distinct callers", maxCallers))
	}
	cfg := b.cfg
	cfg.Caller = chunkfs.Caller{UID: caller.UID, GIDs: slices.Clone(caller.GIDs)}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b.clients[key] = c
	return c, nil
}

func callerKey(c chunkfs.Caller) string {
	var sb strings.Builder
	sb.WriteString(strconv.FormatUint(uint64(c.UID), 10))
	for _, g := range c.GIDs {
		sb.WriteByte(':')
		sb.WriteString(strconv.FormatUint(uint64(g), 10))
	}
	return sb.String()
}

// Stat describes path.
func (b *ClientBackend) Stat(ctx context.Context, caller chunkfs.Caller, path string) (*chunkfs.FileInfo, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, err
	}
	defer b.seen(c)
	return c.Stat(ctx, path)
}

// ReadDir lists path with attributes.
func (b *ClientBackend) ReadDir(ctx context.Context, caller chunkfs.Caller, path string) ([]*chunkfs.FileInfo, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, err
	}
	defer b.seen(c)
	es, err := c.ReadDir(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make([]*chunkfs.FileInfo, 0, len(es))
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		ci, ok := fi.(*chunkfs.FileInfo)
		if !ok {
			return nil, chunkfs.E("readdir", path, chunkfs.KindOther, "entry without chunkfs attributes")
		}
		out = append(out, ci)
	}
	return out, nil
}

// Mkdir makes a directory and describes it and its parent, from the
// mkdir's answer (a stat describes the directory when the answer does
// not).
func (b *ClientBackend) Mkdir(ctx context.Context, caller chunkfs.Caller, path string, perm fs.FileMode) (fi, parent *chunkfs.FileInfo, err error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, nil, err
	}
	defer b.seen(c)
	fi, parent, err = c.MkdirParent(ctx, path, perm)
	if err == nil && fi == nil {
		fi, err = c.Stat(ctx, path)
	}
	return fi, parent, err
}

// Create makes a file as the caller and opens it for I/O. A file that
// exists already is opened as Open does, which checks the caller's right
// to write it, and truncated if asked.
func (b *ClientBackend) Create(ctx context.Context, caller chunkfs.Caller, path string, perm fs.FileMode, exclusive, truncate bool, at time.Time) (File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, nil, nil, err
	}
	defer b.seen(c)
	made, fi, parent, err := c.OpenFileParent(ctx, path, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm, client.CreateOptions{Time: at})
	if chunkfs.KindOf(err) == chunkfs.KindExist && !exclusive {
		f, fi, err := b.openExisting(ctx, caller, path, truncate)
		return f, fi, nil, err
	}
	if err != nil {
		return nil, nil, nil, err
	}
	made.Close() // nothing written: no call to the cluster
	b.io.Forget(path)
	f, fi, err := b.openIO(ctx, c, path, os.O_RDWR, fi)
	if err != nil {
		return nil, nil, nil, err
	}
	return f, fi, parent, nil
}

// openExisting opens an existing file for writing as Create found it,
// emptying it when truncate is set.
func (b *ClientBackend) openExisting(ctx context.Context, caller chunkfs.Caller, path string, truncate bool) (File, *chunkfs.FileInfo, error) {
	f, fi, err := b.Open(ctx, caller, path, true)
	if err != nil || !truncate || fi.Length == 0 {
		return f, fi, err
	}
	if fi, err = b.SetAttr(ctx, caller, path, SetAttr{Size: new(int64)}); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Open checks that the caller may read the file (or write it, when write
// is set) and opens it for I/O.
func (b *ClientBackend) Open(ctx context.Context, caller chunkfs.Caller, path string, write bool) (File, *chunkfs.FileInfo, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, nil, err
	}
	defer b.seen(c)
	fi, err := c.Stat(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	flag, want := os.O_RDONLY, chunkfs.AccessRead
	if write {
		flag, want = os.O_RDWR, chunkfs.AccessWrite
	}
	if !caller.Allows(fi.FileMode, fi.UID, fi.GID, want) {
		return nil, nil, chunkfs.E("open", path, chunkfs.KindPermission, "")
	}
	return b.openIO(ctx, c, path, flag, fi)
}

// openIO opens path for the I/O of a descriptor whose access c, the
// caller's client, decided on fi, which it has just learned from the
// master (so the I/O client asks nothing again); the I/O client first
// adopts what c has seen.
func (b *ClientBackend) openIO(ctx context.Context, c *client.Client, path string, flag int, fi *chunkfs.FileInfo) (File, *chunkfs.FileInfo, error) {
	b.seen(c)
	// The file keeps this context for all its I/O: it must outlive the
	// request that opened it.
	f, err := b.io.OpenKnown(context.WithoutCancel(ctx), path, flag, fi)
	if err != nil {
		return nil, nil, err
	}
	return clientFile{f: f, write: flag&(os.O_WRONLY|os.O_RDWR) != 0, unsynced: b.unsynced}, fi, nil
}

// Remove removes a file, link or empty directory.
func (b *ClientBackend) Remove(ctx context.Context, caller chunkfs.Caller, path string) (*chunkfs.FileInfo, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, err
	}
	defer b.seen(c)
	parent, err := c.RemoveParent(ctx, path)
	if err != nil {
		return nil, err
	}
	b.io.Forget(path)
	return parent, nil
}

// Rename moves src to dst, or swaps them, in one call to the master.
func (b *ClientBackend) Rename(ctx context.Context, caller chunkfs.Caller, src, dst string, how RenameHow) error {
	c, err := b.client(ctx, caller)
	if err != nil {
		return err
	}
	defer b.seen(c)
	switch how {
	case RenameNoReplace:
		err = c.RenameNoReplace(ctx, src, dst)
	case RenameExchange:
		err = c.Exchange(ctx, src, dst)
	default:
		err = c.Rename(ctx, src, dst)
	}
	if err != nil {
		return err
	}
	b.io.Forget(src)
	b.io.Forget(dst)
	return nil
}

// Link makes a hard link and describes the file under its new name.
func (b *ClientBackend) Link(ctx context.Context, caller chunkfs.Caller, oldpath, newpath string) (*chunkfs.FileInfo, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, err
	}
	defer b.seen(c)
	if err := c.Link(ctx, oldpath, newpath); err != nil {
		return nil, err
	}
	b.io.Forget(newpath)
	return c.Stat(ctx, newpath)
}

// SetAttr applies a's changes one call at a time (mode, owner, times,
// length) and describes the result.
func (b *ClientBackend) SetAttr(ctx context.Context, caller chunkfs.Caller, path string, a SetAttr) (*chunkfs.FileInfo, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, err
	}
	defer b.seen(c)
	if a.Size != nil {
		defer b.io.Forget(path)
	}
	for _, step := range setAttrSteps(c, path, a) {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return c.Stat(ctx, path)
}

func setAttrSteps(c *client.Client, path string, a SetAttr) []func(context.Context) error {
	var steps []func(context.Context) error
	if a.Perm != nil {
		steps = append(steps, func(ctx context.Context) error { return c.Chmod(ctx, path, *a.Perm) })
	}
	if a.UID != nil || a.GID != nil {
		uid, gid := -1, -1
		if a.UID != nil {
			uid = int(*a.UID)
		}
		if a.GID != nil {
			gid = int(*a.GID)
		}
		steps = append(steps, func(ctx context.Context) error { return c.Chown(ctx, path, uid, gid) })
	}
	if a.Size != nil {
		steps = append(steps, func(ctx context.Context) error { return c.Truncate(ctx, path, *a.Size) })
	}
	if a.TimesNow {
		steps = append(steps, func(ctx context.Context) error { return c.Touch(ctx, path) })
	} else if a.ATime != nil || a.MTime != nil {
		var at, mt time.Time
		if a.ATime != nil {
			at = *a.ATime
		}
		if a.MTime != nil {
			mt = *a.MTime
		}
		steps = append(steps, func(ctx context.Context) error { return c.Chtimes(ctx, path, at, mt) })
	}
	return steps
}

// Mknod makes a fifo, socket or device node and describes it.
func (b *ClientBackend) Mknod(ctx context.Context, caller chunkfs.Caller, path string, mode fs.FileMode, dev uint32) (*chunkfs.FileInfo, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, err
	}
	defer b.seen(c)
	return c.Mknod(ctx, path, mode, dev)
}

// Symlink makes a symbolic link and describes it and its parent, from the
// create's answer.
func (b *ClientBackend) Symlink(ctx context.Context, caller chunkfs.Caller, target, path string) (fi, parent *chunkfs.FileInfo, err error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, nil, err
	}
	defer b.seen(c)
	return c.SymlinkParent(ctx, target, path)
}

// Readlink returns a link's target.
func (b *ClientBackend) Readlink(ctx context.Context, caller chunkfs.Caller, path string) (string, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return "", err
	}
	defer b.seen(c)
	return c.Readlink(ctx, path)
}

// Usage sums the capacity of the live chunkservers.
func (b *ClientBackend) Usage(ctx context.Context) (Usage, error) {
	c, err := b.client(ctx, b.cfg.Caller)
	if err != nil {
		return Usage{}, err
	}
	defer b.seen(c)
	r, err := c.ClusterReport(ctx)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Files: r.Files + r.Directories}
	for _, s := range r.Servers {
		if s.Alive {
			u.Capacity += s.Capacity
			u.Used += s.Used
		}
	}
	u.Free = max(u.Capacity-u.Used, 0)
	return u, nil
}

// clientFile adapts *client.File, whose I/O uses the context it was opened
// with, to File.
type clientFile struct {
	f        *client.File
	write    bool
	unsynced bool // Close does not sync the replicas (SyncOnClose(false))
}

func (f clientFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return f.f.ReadAt(p, off)
}

// WriteAt writes p through to the cluster: the client buffers it (sending
// pieces at chunk boundaries in the background), and the zero seek that
// follows sends the rest and waits, so the data is on every replica when
// WriteAt returns. The mount's own write-behind decides what to batch.
func (f clientFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	if err != nil {
		return n, err
	}
	if _, err := f.f.Seek(0, io.SeekCurrent); err != nil {
		return 0, err
	}
	return n, nil
}

// Sync syncs a file open for writing; fsync of a read-only descriptor has
// nothing to do.
func (f clientFile) Sync(ctx context.Context) error {
	if !f.write {
		return nil
	}
	return f.f.Sync()
}

func (f clientFile) Close() error {
	if f.unsynced {
		return f.f.CloseUnsynced()
	}
	return f.f.Close()
}

// Moved re-points the file at its new path after the mount renamed it.
func (f clientFile) Moved(path string) error { return f.f.Moved(path) }

// GetXattr returns one extended attribute.
func (b *ClientBackend) GetXattr(ctx context.Context, caller chunkfs.Caller, path, name string) ([]byte, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, err
	}
	defer b.seen(c)
	return c.GetXattr(ctx, path, name)
}

// ListXattr lists extended attribute names.
func (b *ClientBackend) ListXattr(ctx context.Context, caller chunkfs.Caller, path string) ([]string, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return nil, err
	}
	defer b.seen(c)
	return c.ListXattr(ctx, path)
}

// SetXattr sets one extended attribute.
func (b *ClientBackend) SetXattr(ctx context.Context, caller chunkfs.Caller, path, name string, value []byte, flags uint32) error {
	c, err := b.client(ctx, caller)
	if err != nil {
		return err
	}
	defer b.seen(c)
	return c.SetXattr(ctx, path, name, value, client.XattrFlags(flags&(xattrCreate|xattrReplace)))
}

// RemoveXattr removes one extended attribute.
func (b *ClientBackend) RemoveXattr(ctx context.Context, caller chunkfs.Caller, path, name string) error {
	c, err := b.client(ctx, caller)
	if err != nil {
		return err
	}
	defer b.seen(c)
	return c.RemoveXattr(ctx, path, name)
}

// LockSession opens, renews, adopts or closes a lock session.
func (b *ClientBackend) LockSession(ctx context.Context, session uint64, reclaim, close bool) (uint64, time.Duration, error) {
	c, err := b.client(ctx, chunkfs.Root)
	if err != nil {
		return 0, 0, err
	}
	defer b.seen(c)
	id, ttl, _, err := c.LockSession(ctx, session, reclaim, close)
	return id, ttl, err
}

// Lock tests, takes or releases a file lock.
func (b *ClientBackend) Lock(ctx context.Context, caller chunkfs.Caller, path string, ino uint64, l locks.Lock, unlock, test, reclaim bool) (bool, locks.Lock, error) {
	c, err := b.client(ctx, caller)
	if err != nil {
		return false, locks.Lock{}, err
	}
	defer b.seen(c)
	fl := client.FileLock{Kind: int(l.Kind), Type: int(l.Type), Start: l.Start, End: l.End, Owner: l.ID, PID: l.PID}
	if unlock {
		fl.Type = client.LockUnlock
	}
	ok, h, err := c.Lock(ctx, path, ino, l.Session, fl, test, reclaim)
	if err != nil {
		return false, locks.Lock{}, err
	}
	return ok, locks.Lock{Owner: locks.Owner{Session: h.Session, ID: h.Owner}, Kind: locks.Kind(h.Kind), Type: locks.Type(h.Type), Start: h.Start, End: h.End, PID: h.PID}, nil
}
